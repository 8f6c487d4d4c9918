package client

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/signature"
)

// maxProblemRead bounds what is read of a refusal's problem+json body to
// learn its code.
const maxProblemRead = 4 << 10

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
// never started, for no request of it can have reached the receiver.
// Signing is bounded by a Timeout of its own, and the request gets a
// whole Timeout from then on.
func (w *Worker) try(ctx context.Context, c protocol.Claimed, claimedAt time.Time) (protocol.Outcome, bool) {
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
	signer, err := w.signer(c.KeyID)
	if parent.Err() != nil {
		return protocol.Outcome{}, false // shut down while it was made ready: nothing sent
	}
	if err != nil {
		return w.signingFailed(c, err), true
	}
	// Signing (a key service may take its time) is bounded by a Timeout
	// of its own: the attempt's Timeout begins once the request is
	// signed, as the lease check below counts it.
	sctx, scancel := context.WithTimeout(parent, w.cfg.Timeout)
	defer scancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodPost, c.Endpoint, bytes.NewReader(c.Payload))
	if err != nil {
		return protocol.Outcome{Result: protocol.Failed, Code: courier.CodeDestinationForbidden}, true
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", wire.UserAgent)
	req.Header.Set(ack.AttemptHeader, strconv.Itoa(c.Attempt))
	w.traceHeaders(parent, req, c)
	// The Signer gets a copy of the payload: what it writes into
	// Message.Body is neither sent nor the Ack checked against.
	err = signer.Sign(req, signature.Message{ID: c.NotificationID, Body: bytes.Clone(c.Payload), Time: w.cfg.Now()})
	if parent.Err() != nil {
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
	ctx, cancel := context.WithTimeout(parent, w.cfg.Timeout)
	defer cancel()
	req = req.WithContext(ctx)
	// The payload is sent byte for byte, whatever the Signer did with the
	// body: one that read it to sign it would leave none to send, and the
	// transport's failure would count against the endpoint.
	req.Body, req.ContentLength = payloadBody(c.Payload), int64(len(c.Payload))
	req.GetBody = func() (io.ReadCloser, error) { return payloadBody(c.Payload), nil }
	resp, err := w.client.Do(req)
	if err != nil {
		// The error names the request's URL, which may hold a
		// credential (userinfo, path, query): Classify hears it named
		// as the logs name it.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = endpoint.Redact(ue.URL)
		}
		return w.judge(ctx, c, nil, err), true
	}
	defer resp.Body.Close()
	// Every read of the answer ends with the attempt: the body is closed
	// when ctx ends, which also reaches a read no deadline bounds.
	raw := resp.Body // remoteCode puts what it read back in front of resp.Body
	defer context.AfterFunc(ctx, func() { _ = raw.Close() })()
	if resp.StatusCode < 200 {
		// A final 1xx (101 Switching Protocols, to a POST): its body is
		// the raw connection, none of which is the receiver's answer.
		_ = resp.Body.Close()
		resp.Body = http.NoBody
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		defer drain(resp.Body)
		return w.judge(ctx, c, resp, nil), true
	}
	oc := protocol.Outcome{HTTPStatus: resp.StatusCode, Result: protocol.Succeeded}
	if profile.Verify == nil {
		return oc, true // no Ack expected: any 2xx
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxAckSize+1))
	if err != nil && undecodable(err) {
		oc.Result, oc.Code = protocol.Failed, courier.CodeAckInvalid // the receiver sent bytes that are no Ack
		return oc, true
	}
	if err != nil { // the answer was cut short: retried, keeping the status that came
		switch {
		case parent.Err() != nil:
			// By a shutdown, as deliver settles an attempt cut short
			// before its answer: due again at once, no failure of the
			// endpoint's.
			oc = protocol.Outcome{Result: protocol.Retry, Code: courier.CodeWorkerStopped}
		case ctx.Err() != nil:
			// By the attempt's timeout, whichever side closed the body
			// first (over HTTP/2 the worker's close above may win over the
			// transport's): the policy hears the deadline, not the close.
			oc = w.judge(ctx, c, nil, context.Cause(ctx))
		default:
			oc = w.judge(ctx, c, nil, err)
		}
		oc.HTTPStatus = resp.StatusCode
		return oc, true
	}
	if err := profile.Verify(ack.Sent{ID: c.NotificationID, Payload: c.Payload, Attempt: c.Attempt}, body); err != nil {
		oc.Result, oc.Code = protocol.Failed, courier.CodeAckInvalid
		return oc, true
	}
	oc.AckSHA256 = ack.Digest(body)
	return oc, true
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
func (w *Worker) signingFailed(c protocol.Claimed, err error) protocol.Outcome {
	if errors.Is(err, courier.CodeConfigInvalid) {
		return protocol.Outcome{Result: protocol.Failed, Code: courier.CodeSigningFailed}
	}
	return protocol.Outcome{Result: protocol.Retry, Code: courier.CodeSigningFailed, RetryDelay: w.backoff(c.Attempt, 0)}
}

// judge turns the policy's verdict on an unacknowledged attempt into its
// outcome: a retry waits as Backoff says, honouring Retry-After.
func (w *Worker) judge(ctx context.Context, c protocol.Claimed, resp *http.Response, err error) protocol.Outcome {
	var remote courier.Code
	if resp != nil {
		remote = remoteCode(resp)
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
		if resp.StatusCode >= 300 && resp.StatusCode < 400 && w.redirectForbidden(ctx, resp) {
			oc.Code = courier.CodeDestinationForbidden
		}
	}
	if v.Retry {
		var after time.Duration
		if resp != nil {
			after = retryAfter(resp.Header.Get("Retry-After"), time.Now())
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

func (w *Worker) signer(keyID string) (signature.Signer, error) {
	if w.cfg.SignerFor == nil {
		return w.cfg.Signer, nil
	}
	s, err := w.cfg.SignerFor(keyID)
	if err == nil && nilcheck.Nil(s) { // a lookup that found nothing: calling it would panic the worker
		err = fmt.Errorf("client: SignerFor returned no signer for key %q: %w", keyID, courier.CodeConfigInvalid)
	}
	return s, err
}

// redirectForbidden reports whether a redirect's target is one the
// transport's guard refuses (when the transport is a guard). The target's
// host is the receiver's choice, so it is looked up within the attempt's
// context: its timeout bounds the lookup, and a lookup that does not end
// in time leaves the answer a plain redirect_refused.
func (w *Worker) redirectForbidden(ctx context.Context, resp *http.Response) bool {
	g, ok := w.cfg.Transport.(*guardTransport)
	if !ok {
		return false
	}
	loc, err := resp.Location()
	if err != nil {
		return false
	}
	return errors.Is(g.guard.check(ctx, loc), courier.CodeDestinationForbidden)
}

// remoteCode returns the receiver's own code from a refusal whose body is
// application/problem+json: its top-level "code" string, kept only when it
// is a valid courier.Code. It reads at most maxProblemRead bytes, strictly
// parsed, and keeps nothing else of them; what it read is put back in
// front of resp.Body, so Classify sees the whole body.
func remoteCode(resp *http.Response) courier.Code {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != problem.ContentType {
		return ""
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemRead+1))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
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

// undecodable reports whether err, from reading an answer's body, is its
// content encoding's: bytes labelled gzip that are not, not the transport
// failing.
func undecodable(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt)
}

// payloadBody is a request body of payload.
func payloadBody(payload []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(payload)) }

// drain reads a little of a body so the connection can be reused.
func drain(r io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(r, 4<<10)) }
