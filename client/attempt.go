package client

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/signature"
)

// Bounds of the reads of a refusal's body. Its status is the answer, and
// the verdict waits for none of the body but its code: a receiver that
// sends the headers and holds the rest back holds the attempt's slot no
// longer than these, not for the attempt's whole Timeout.
const (
	// maxProblemRead bounds what is read of a refusal's problem+json
	// body to learn its code, and maxProblemWait how long that read may
	// take: a body not over by then is read no further, and has no code.
	maxProblemRead = 4 << 10
	maxProblemWait = time.Second
	// maxDrain bounds what is read of what is left of a judged refusal's
	// body so that its connection can be used again, and maxDrainWait
	// how long that read may take: a body not over by then is closed,
	// and its connection with it.
	maxDrain     = 4 << 10
	maxDrainWait = 50 * time.Millisecond
)

// maxStatus is the largest status an answer can carry: HTTP/1's status
// line holds three digits (see try).
const maxStatus = 999

// errMalformedStatus is the error an answer whose status is not three
// digits is judged with.
var errMalformedStatus = errors.New("client: malformed answer: its status is not three digits")

// try makes the attempt of c, claimed at claimedAt: it signs and sends
// the request, then judges the answer: a 2xx by the delivery's profile,
// anything else by the configured policy. Resolving the signer
// (Config.SignerFor may ask a key store) and signing take time the lease
// check of deliver did not see, so the lease is checked again once the
// request is signed: if it no longer covers a whole Timeout, nothing is
// sent and try reports the attempt not ready (false), for the caller to
// give the delivery back, unless the signing alone took more than the
// lease spares over a Timeout: then the attempt is retried with code
// signing_failed (see signedTooSlowly). If the delivery's deadline came
// meanwhile, nothing is sent either, and the attempt fails with code
// expired. Nor is anything sent when ctx ends (a hard shutdown) while the
// signer is resolved or signs: the attempt is not ready either, whatever
// the signing came to, and the delivery is given back uncounted, as one
// never started, for no request of it can have reached the receiver. Nor
// is anything sent once the Store is closed (store.Store.Close): its
// outcome could never be recorded, and the request would be sent again
// once the lease expired; try reports the attempt not ready. That is
// looked at once more as the transport comes to write the request, for a
// Close may land while it connects (see timelyBody).
// Signing is bounded by a Timeout of its own, and the request gets a
// whole Timeout from then on; a request that the transport comes to write
// only after that Timeout (the worker was held up meanwhile) is not
// written, and the attempt is not ready either (see timelyBody).
// How far the attempt got is kept in *got as it goes (see progress), for
// tryUnpanicked to read should something of the configuration's panic.
// A request that fails once the attempt is cut short by a shutdown is
// retried with code worker_stopped, due again at once, sparing the
// delivery's budget (see stoppedOutcome). A destination the guard refused
// was not dialed: it fails as such, shutdown or not, as does any outcome
// reached before the request was handed to the transport.
func (w *Worker) try(ctx context.Context, c protocol.Claimed, claimedAt time.Time, got *progress) (protocol.Outcome, bool) {
	profile, ok := w.outbox.Profile(c.Profile)
	if !ok {
		// The Store that enqueued it knew the profile (Enqueue refuses
		// one it does not): this worker's lags behind, as in a rolling
		// deploy. Nothing is sent, and the delivery is retried, for a
		// worker that knows it, until its budget or deadline runs out.
		return protocol.Outcome{Result: protocol.Retry, Code: courier.CodeConfigInvalid, RetryDelay: w.backoff(c.Attempt, 0)}, true
	}
	signFrom := w.cfg.Now()
	parent := ctx // the worker's: it ends at a hard shutdown
	// Signing, the signer's lookup included (a key service may take its
	// time), is bounded by a Timeout of its own: the attempt's Timeout
	// begins once the request is signed, as the lease check below counts it.
	sctx, scancel := context.WithTimeout(parent, w.cfg.Timeout)
	defer scancel()
	signer, err := w.signer(sctx, c.KeyID)
	if w.cutShort(parent) {
		return protocol.Outcome{}, false // shut down while it was made ready: nothing sent
	}
	if err != nil {
		return w.signingFailed(c, err), true
	}
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, c.Endpoint, bytes.NewReader(c.Payload))
	if err != nil {
		return protocol.Outcome{Result: protocol.Failed, Code: courier.CodeDestinationForbidden}, true
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", wire.UserAgent)
	req.Header.Set(ack.AttemptHeader, strconv.Itoa(c.BudgetAttempt()))
	w.traceHeaders(parent, req, c)
	// The Signer gets a copy of the payload: what it writes into
	// Message.Body is neither sent nor the Ack checked against.
	err = signer.Sign(req, signature.Message{ID: c.NotificationID, Body: bytes.Clone(c.Payload), Time: w.cfg.Now()})
	if w.cutShort(parent) {
		return protocol.Outcome{}, false // shut down while it was signed: nothing sent
	}
	if err != nil {
		return w.signingFailed(c, err), true
	}
	now := w.cfg.Now()
	tooSlow := w.signedTooSlowly(parent, c, claimedAt, now, now.Sub(signFrom))
	if !tooSlow && !w.leaseCovers(parent, c, claimedAt, now) {
		return protocol.Outcome{}, false
	}
	if pastDeadline(c, claimedAt, now) { // it came while the request was made ready
		return protocol.Outcome{Result: protocol.Failed, Code: courier.CodeExpired}, true
	}
	if tooSlow {
		return protocol.Outcome{Result: protocol.Retry, Code: courier.CodeSigningFailed, RetryDelay: w.backoff(c.Attempt, 0)}, true
	}
	if w.storeClosed() { // closed while it was signed: its outcome could never be recorded
		return protocol.Outcome{}, false
	}
	// actx is the attempt's: its Timeout bounds connecting, sending and
	// reading the answer.
	actx, cancel := context.WithTimeout(parent, w.cfg.Timeout)
	defer cancel()
	// The payload is sent byte for byte, whatever the Signer did with the
	// body: one that read it to sign it would leave none to send, and the
	// transport's failure would count against the endpoint. It is read
	// only while the attempt's Timeout lasts (see timelyBody).
	wctx, stop := context.WithCancelCause(actx)
	defer stop(nil)
	timely := &timelyBody{payload: c.Payload, now: w.cfg.Now, by: w.sendBy(c, claimedAt, now), store: w.life.Done(), stop: stop}
	req = req.WithContext(httptrace.WithClientTrace(wctx, &httptrace.ClientTrace{WroteHeaders: timely.wroteHeaders}))
	req.Body, _ = timely.open()
	req.ContentLength, req.GetBody = int64(len(c.Payload)), timely.open
	got.handed = true
	resp, err := w.client.Do(req)
	if timely.closed.Load() {
		// The Store closed while the request was on its way to the
		// transport: it was not written, and the delivery is left to its
		// lease (see release).
		if err == nil {
			_ = resp.Body.Close()
		}
		return protocol.Outcome{}, false
	}
	if timely.late.Load() {
		// Held up between the lease check and the write (a paused
		// process): the request never went out whole, so no receiver
		// acted on it, and the lease may be another worker's by now.
		if err == nil {
			_ = resp.Body.Close() // an answer to a request cut short
		}
		w.cfg.Logger.LogAttrs(parent, slog.LevelWarn, "worker: request not written within its Timeout, released",
			append(attemptAttrs(c), slog.Duration(logkey.LeaseLeft, w.leaseLeft(parent, c.Lease, claimedAt)), slog.Duration(logkey.Timeout, w.cfg.Timeout))...)
		return protocol.Outcome{}, false
	}
	if err != nil {
		if w.cutShort(parent) && !errors.Is(err, courier.CodeDestinationForbidden) {
			// Cut short by shutdown (see stoppedOutcome). A destination
			// the guard refused was never dialed: that is its outcome,
			// whenever the shutdown came.
			return stoppedOutcome(), true
		}
		// The error names the request's URL, which may hold a
		// credential (userinfo, path, query): Classify hears it named
		// as the logs name it.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = endpoint.Redact(ue.URL)
		}
		return w.judge(actx, c, nil, err), true
	}
	defer resp.Body.Close()
	if resp.StatusCode < 0 || resp.StatusCode > maxStatus {
		// Over HTTP/2 the status is whatever digits the receiver wrote;
		// HTTP/1's transport refuses a status line without three, as a
		// malformed answer. Judged alike, it is a network error, and no
		// status is recorded: one of any size, or a negative one, is no
		// answer's, and does not fit the database's columns.
		return w.judge(actx, c, nil, &url.Error{Op: "Post", URL: endpoint.Redact(c.Endpoint), Err: errMalformedStatus}), true
	}
	got.status = resp.StatusCode
	// Every read of the answer ends with the attempt: the body is closed
	// when actx ends, which also reaches a read no deadline bounds.
	raw := resp.Body // remoteCode puts what it read back in front of resp.Body
	defer context.AfterFunc(actx, func() { _ = raw.Close() })()
	if resp.StatusCode < 200 {
		// A final 1xx (101 Switching Protocols, to a POST): its body is
		// the raw connection, none of which is the receiver's answer.
		_ = resp.Body.Close()
		resp.Body = http.NoBody
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		defer drain(resp.Body)
		return w.judge(actx, c, resp, nil), true
	}
	return w.acknowledged(parent, actx, c, profile, resp), true
}

// progress is how far an attempt got (see try): whether its request was
// handed to the transport, from when on it may reach the receiver, and
// the receiver's status once its answer came, before anything of the
// configuration's judges it.
type progress struct {
	handed bool
	status int
}

// acknowledged judges resp, a 2xx answer to c's request, by the
// delivery's profile: it succeeds when the profile expects no Ack or
// verifies the one in its body, and fails with ack_invalid otherwise. An
// answer cut short while its body is read is retried, keeping its status:
// as a stopped attempt when parent (the worker's) ended, by the policy
// otherwise. actx is the attempt's.
func (w *Worker) acknowledged(parent, actx context.Context, c protocol.Claimed, profile ack.Profile, resp *http.Response) protocol.Outcome {
	oc := protocol.Outcome{HTTPStatus: resp.StatusCode, Result: protocol.Succeeded}
	if profile.Verify == nil {
		return oc // no Ack expected: any 2xx
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxAckSize+1))
	if err != nil && undecodable(err) {
		oc.Result, oc.Code = protocol.Failed, courier.CodeAckInvalid // the receiver sent bytes that are no Ack
		oc.Cause = ackRefused(profile.Name, true)
		return oc
	}
	if err != nil { // the answer was cut short: retried, keeping the status that came
		switch {
		case parent.Err() != nil:
			// By a shutdown, as an attempt cut short before its answer
			// (see stoppedOutcome).
			oc = stoppedOutcome()
		case actx.Err() != nil:
			// By the attempt's timeout, whichever side closed the body
			// first (over HTTP/2 try's close of it may win over the
			// transport's): the policy hears the deadline, not the close.
			oc = w.judge(actx, c, nil, context.Cause(actx))
		default:
			oc = w.judge(actx, c, nil, err)
		}
		oc.HTTPStatus = resp.StatusCode
		return oc
	}
	if err := profile.Verify(ack.Sent{ID: c.NotificationID, Payload: c.Payload, Attempt: c.BudgetAttempt()}, body); err != nil {
		oc.Result, oc.Code = protocol.Failed, courier.CodeAckInvalid
		oc.Cause = ackRefused(profile.Name, len(body) > 0)
		return oc
	}
	oc.AckSHA256 = ack.Digest(body)
	return oc
}

// stoppedOutcome is the outcome of an attempt cut short as the worker
// stops (Stop's context ended, or Run's or Work's): a retry with code
// worker_stopped, due again at once, for any worker. The request may have
// reached the receiver, so the attempt is counted and logged; but a stop
// says nothing of the delivery, so it spares its budget
// (protocol.Outcome.SpareBudget): a deploy during a delivery's last
// attempt does not fail it, and only its deadline ends it (or its
// 1000th attempt, the most any delivery makes). Nor does it say anything
// of the endpoint: its breaker does not count it.
func stoppedOutcome() protocol.Outcome {
	return protocol.Outcome{Result: protocol.Retry, Code: courier.CodeWorkerStopped, SpareBudget: true}
}

// signedTooSlowly reports whether signing c's request took so long
// (signing, resolving the signer included) that no lease of c's length
// would still cover a whole Timeout after it: the lease was spent by the
// signing itself, not by what came before it. Given back, the delivery
// would be claimed and signed again at once, as slowly, again and again
// until its deadline, its attempts never counted: such a signing counts
// as a signing that failed for a passing reason (a key store too slow for
// the lease), and is logged.
func (w *Worker) signedTooSlowly(ctx context.Context, c protocol.Claimed, claimedAt, now time.Time, signing time.Duration) bool {
	spare := c.Lease.ExpiresAt.Sub(c.Lease.LeasedAt) - w.cfg.Timeout
	if signing <= spare {
		return false
	}
	w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "worker: signing took more of the lease than a Timeout leaves, retried later",
		append(attemptAttrs(c), slog.String(logkey.Code, string(courier.CodeSigningFailed)),
			slog.Duration(logkey.LeaseLeft, leaseLeftAt(c.Lease, claimedAt, now)), slog.Duration(logkey.Timeout, w.cfg.Timeout))...)
	return true
}

// signingFailed is the outcome of an attempt that could not be signed:
// failed for good when the error says the key is gone for good (it wraps
// courier.CodeConfigInvalid; see Config.SignerFor), retried otherwise.
// The error is its Cause, for the log line.
func (w *Worker) signingFailed(c protocol.Claimed, err error) protocol.Outcome {
	if errors.Is(err, courier.CodeConfigInvalid) {
		return protocol.Outcome{Result: protocol.Failed, Code: courier.CodeSigningFailed, Cause: err}
	}
	return protocol.Outcome{Result: protocol.Retry, Code: courier.CodeSigningFailed, RetryDelay: w.backoff(c.Attempt, 0), Cause: err}
}

// judge turns the policy's verdict on an unacknowledged attempt into its
// outcome: a retry waits as Backoff says, honouring Retry-After. A
// redirect's Location is judged before any of the answer's body is read:
// a body the receiver holds back would otherwise spend the time its
// lookup needs.
func (w *Worker) judge(ctx context.Context, c protocol.Claimed, resp *http.Response, err error) protocol.Outcome {
	var remote courier.Code
	var refusal error // the guard's: of the destination, or of a redirect's target
	if resp != nil {
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			refusal = w.redirectForbidden(ctx, resp)
		}
		remote = remoteCode(resp)
	} else {
		refusal = guardRefusal(err)
	}
	v := w.cfg.Classify(resp, err)
	if !wire.IsCode(v.Code) {
		// No code, or none that is valid: DefaultClassify's for the same
		// answer (the Verdict's Retry stands), so a reset stays a
		// network_error and a 503 a receiver_unavailable, as the breaker
		// and the attempts log read them.
		v.Code = DefaultClassify(resp, err).Code
	}
	oc := protocol.Outcome{Result: protocol.Failed, Code: v.Code, RemoteCode: remote}
	if resp != nil {
		oc.HTTPStatus = resp.StatusCode
		if refusal != nil {
			oc.Code = courier.CodeDestinationForbidden
		}
	}
	if oc.Code == courier.CodeDestinationForbidden {
		oc.Refusal = refusal
	} else if resp == nil {
		oc.Cause = networkCause(err)
	}
	if v.Retry {
		var after time.Duration
		if resp != nil {
			after = retryAfter(resp.Header.Get("Retry-After"), w.cfg.Now)
		}
		oc.Result, oc.RetryDelay = protocol.Retry, w.backoff(c.Attempt, after)
	}
	return oc
}

// backoff is Config.Backoff's delay before the next attempt, a negative
// one taken as none.
func (w *Worker) backoff(attempt int, retryAfter time.Duration) time.Duration {
	return max(0, w.cfg.Backoff(attempt, retryAfter))
}

// signer is the signer of an attempt under keyID, looked up in ctx.
func (w *Worker) signer(ctx context.Context, keyID string) (signature.Signer, error) {
	if w.cfg.SignerFor == nil {
		return w.cfg.Signer, nil
	}
	s, err := w.cfg.SignerFor(ctx, keyID)
	if err == nil && nilcheck.Nil(s) { // a lookup that found nothing: calling it would panic the worker
		err = fmt.Errorf("client: SignerFor returned no signer for key %q: %w", keyID, courier.CodeConfigInvalid)
	}
	return s, err
}

// redirectForbidden returns the guard's refusal of a redirect's target,
// nil when the transport is no guard or the guard allows it. The target's
// host is the receiver's choice, so it is looked up within the attempt's
// context: its timeout bounds the lookup, and a lookup that does not end
// in time leaves the answer a plain redirect_refused.
func (w *Worker) redirectForbidden(ctx context.Context, resp *http.Response) error {
	g, ok := w.cfg.Transport.(*guardTransport)
	if !ok {
		return nil
	}
	if loc, err := resp.Location(); err == nil { // else no target to judge: a plain redirect_refused
		return guardRefusal(g.guard.check(ctx, loc))
	}
	return nil
}

// guardRefusal returns the guard's refusal in err's chain, nil if there
// is none: the error itself, without the *url.Error around it, whose URL
// the log names otherwise.
func guardRefusal(err error) error {
	var refusal *coded.Error
	if errors.As(err, &refusal) && refusal.Code == courier.CodeDestinationForbidden {
		return refusal
	}
	return nil
}

// networkCause returns the cause in err's chain of an attempt that got no
// answer, for the log line that says why: a certificate, TLS, DNS or socket
// error, whose message names addresses and host names. Nil when the chain
// holds none of those: net/http's own errors of a malformed answer quote
// the bytes the other side sent, and are not logged; nor is the *url.Error
// around the cause, whose URL the log names otherwise.
func networkCause(err error) error {
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return untrusted(cert)
	}
	var record tls.RecordHeaderError // its message leaves out the bytes it read
	if errors.As(err, &record) {
		return record
	}
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return alert
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op
	}
	return nil
}

// untrusted says why the receiver's certificate was not trusted in words
// of its own: x509's messages quote the certificate's names (up to 99 of
// them, any text the receiver chose), which are the other side's bytes.
// The host it names is the endpoint's, as the worker dialled it.
func untrusted(err *tls.CertificateVerificationError) error {
	why := "x509: certificate not trusted"
	var name x509.HostnameError
	var authority x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err.Err, &name):
		why = "x509: certificate is not valid for " + name.Host
	case errors.As(err.Err, &authority):
		why = "x509: certificate signed by unknown authority"
	case errors.As(err.Err, &invalid) && invalid.Reason == x509.Expired:
		why = "x509: certificate has expired or is not yet valid"
	}
	return errors.New("tls: failed to verify certificate: " + why)
}

// remoteCode returns the receiver's own code from a refusal whose body is
// application/problem+json: its top-level "code" string, kept only when it
// is a valid courier.Code. It reads at most maxProblemRead bytes, strictly
// parsed, and keeps nothing else of them; what it read is put back in
// front of resp.Body, so Classify sees the whole body. A body not over
// within maxProblemWait is closed, and has no code.
func remoteCode(resp *http.Response) courier.Code {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != problem.ContentType {
		return ""
	}
	body := resp.Body
	var head []byte
	readWithin(body, maxProblemWait, func() { head, err = io.ReadAll(io.LimitReader(body, maxProblemRead+1)) })
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), body), body}
	if err != nil || len(head) > maxProblemRead {
		return ""
	}
	v, err := strictjson.Parse(head)
	if err != nil || v.Kind != strictjson.Object {
		return ""
	}
	for _, m := range v.Members {
		if m.Key == "code" && m.Val.Kind == strictjson.String {
			if code := courier.Code(m.Val.Text); wire.IsCode(code) {
				return code
			}
		}
	}
	return ""
}

// readCloser is a body whose reads come from one reader and whose Close
// closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// ackRefused is what the worker's log line says of a 2xx answer that
// profile refused (ack_invalid): whether it had a body, never what the body
// held (a custom profile's Verify error might quote it). An empty 2xx is
// what a receiver that is no courier receiver answers, and the way out is
// the delivery's profile, so the line names it.
func ackRefused(profile string, hadBody bool) error {
	if !hadBody {
		return fmt.Errorf("client: the answer has no body, and profile %s wants an Ack: a receiver that answers a bare 2xx takes deliveries of profile none (ack.ProfileNone)", profile)
	}
	return fmt.Errorf("client: the answer is not the Ack profile %s wants for the bytes sent", profile)
}

// undecodable reports whether err, from reading an answer's body, is its
// content encoding's: bytes labelled gzip that are not, not the transport
// failing.
func undecodable(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt)
}

// sendBy is the time, on the worker's clock, from which no byte of c's
// request may be written any more: a Timeout after now, when the lease
// was last found to cover one, and never later than the lease's end or
// the delivery's deadline.
func (w *Worker) sendBy(c protocol.Claimed, claimedAt, now time.Time) time.Time {
	by := now.Add(w.cfg.Timeout)
	if end := claimedAt.Add(c.Lease.ExpiresAt.Sub(c.Lease.LeasedAt)); end.Before(by) {
		by = end
	}
	if !c.Deadline.IsZero() {
		if end := claimedAt.Add(c.Deadline.Sub(c.LeasedAt)); end.Before(by) {
			by = end
		}
	}
	return by
}

// errWrittenLate is what a timelyBody gives for a request written too
// late to be sent again.
var errWrittenLate = errors.New("client: the request's Timeout ran out before it was written")

// errClosedUnwritten is what a timelyBody gives for a request whose Store
// closed before it was written.
var errClosedUnwritten = errors.New("client: the Store closed before the request was written")

// timelyBody makes the request bodies of one attempt and sees that none
// is written from by on, on the worker's clock, nor once the Store is
// closed. The lease is checked before the request is handed to the
// transport, but a worker held up after that check (a stopped VM, a long
// pause) would otherwise write the request when it resumes, its Timeout
// and lease perhaps long over and the delivery claimed again by another
// worker: the receiver would have two requests of it at once. Once the
// transport has a connection and has made the request's headers ready
// (wroteHeaders, before any byte of an HTTP/1 request is written: an
// in-memory body's headers go out with it), a request found late gets an
// empty body, which the transport, expecting the payload's length, fails,
// and its context is cancelled (over HTTP/2, whose headers are already
// out, that resets the stream); late is set. A request whose Store was
// closed by then is held back in the same way, and closed is set instead:
// a Close that lands after the worker's last look before the send (while
// the transport connects, say) would otherwise let out a request whose
// outcome can never be recorded. This is the latest check the worker can
// make; a pause, or a Close, between it and the write itself is not seen.
// An empty payload's request is all headers, written by then: it is not
// held back.
type timelyBody struct {
	payload []byte
	now     func() time.Time
	by      time.Time
	store   <-chan struct{}              // closed once the Store is
	stop    context.CancelCauseFunc      // the request's
	cur     atomic.Pointer[bytes.Reader] // the body being written
	late    atomic.Bool
	closed  atomic.Bool
}

// open returns a body that reads the payload from its start.
func (b *timelyBody) open() (io.ReadCloser, error) {
	if b.closed.Load() {
		return nil, errClosedUnwritten // not to be tried again
	}
	if b.late.Load() {
		return nil, errWrittenLate // not to be tried again
	}
	r := bytes.NewReader(b.payload)
	b.cur.Store(r)
	return io.NopCloser(r), nil
}

// wroteHeaders is the request's httptrace WroteHeaders, called as the
// transport writes it, before its body, on a goroutine of the
// transport's: a Config.Now that panics there is taken as on time, the
// request written as it would be without the check.
func (b *timelyBody) wroteHeaders() {
	if len(b.payload) == 0 {
		return
	}
	cause := errClosedUnwritten
	select {
	case <-b.store:
		b.closed.Store(true)
	default:
		if !b.lateNow() {
			return
		}
		b.late.Store(true)
		cause = errWrittenLate
	}
	if r := b.cur.Load(); r != nil {
		r.Reset(nil)
	}
	b.stop(cause)
}

// lateNow reports whether the clock has reached by; false if it panics.
func (b *timelyBody) lateNow() (late bool) {
	defer func() {
		if recover() != nil {
			late = false
		}
	}()
	return !b.now().Before(b.by)
}

// drain reads what is left of a judged refusal's body, up to maxDrain,
// so that its connection can be used again, for no longer than
// maxDrainWait: a body not over by then is closed, and its connection
// with it.
func drain(body io.ReadCloser) {
	readWithin(body, maxDrainWait, func() { _, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrain)) })
}

// readWithin runs read, a read of body, and closes body if read has not
// returned within d, which ends it.
func readWithin(body io.Closer, d time.Duration, read func()) {
	late := time.AfterFunc(d, func() { _ = body.Close() })
	defer late.Stop()
	read()
}
