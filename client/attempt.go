package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/signature"
)

// attempt sends one attempt and decides its outcome. aborted reports an
// attempt cut short because ctx (the worker's) was cancelled.
func (w *Worker) attempt(ctx context.Context, c protocol.Claimed) (oc protocol.Outcome, aborted bool) {
	oc = w.try(ctx, c)
	return oc, ctx.Err() != nil && oc.HTTPStatus == 0
}

// try makes the attempt: it signs and sends the request, then judges the
// answer: a 2xx by the delivery's profile, anything else by the
// configured policy.
func (w *Worker) try(ctx context.Context, c protocol.Claimed) protocol.Outcome {
	profile, ok := w.cfg.Profiles(c.Profile)
	if !ok {
		return protocol.Outcome{Result: protocol.Failed, Code: courier.CodeConfigInvalid}
	}
	signer, err := w.signer(c.KeyID)
	if err != nil {
		return protocol.Outcome{Result: protocol.Retry, Code: courier.CodeSigningFailed, RetryDelay: w.cfg.Backoff(c.Attempt, 0)}
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Endpoint, bytes.NewReader(c.Payload))
	if err != nil {
		return protocol.Outcome{Result: protocol.Failed, Code: courier.CodeDestinationForbidden}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(ack.AttemptHeader, strconv.Itoa(c.Attempt))
	if err := signer.Sign(req, signature.Message{ID: c.NotificationID, Body: c.Payload, Time: w.cfg.Now()}); err != nil {
		return protocol.Outcome{Result: protocol.Retry, Code: courier.CodeSigningFailed, RetryDelay: w.cfg.Backoff(c.Attempt, 0)}
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return w.judge(ctx, c, nil, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		defer drain(resp.Body)
		return w.judge(ctx, c, resp, nil)
	}
	oc := protocol.Outcome{HTTPStatus: resp.StatusCode, Result: protocol.Succeeded}
	if profile.Verify == nil {
		return oc // no Ack expected: any 2xx
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, ack.MaxAckSize+1))
	if err != nil {
		return w.judge(ctx, c, nil, err)
	}
	if err := profile.Verify(ack.Sent{ID: c.NotificationID, Payload: c.Payload, Attempt: c.Attempt}, body); err != nil {
		oc.Result, oc.Code = protocol.Failed, courier.CodeAckInvalid
		return oc
	}
	oc.AckSHA256 = ack.Digest(body)
	return oc
}

// judge turns the policy's verdict on an unacknowledged attempt into its
// outcome: a retry waits as Backoff says, honouring Retry-After.
func (w *Worker) judge(ctx context.Context, c protocol.Claimed, resp *http.Response, err error) protocol.Outcome {
	v := w.cfg.Classify(resp, err)
	if !v.Code.Valid() {
		v.Code = courier.CodeReceiverRejected
	}
	oc := protocol.Outcome{Result: protocol.Failed, Code: v.Code}
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
		oc.Result, oc.RetryDelay = protocol.Retry, w.cfg.Backoff(c.Attempt, after)
	}
	return oc
}

func (w *Worker) signer(keyID string) (signature.Signer, error) {
	if w.cfg.SignerFor != nil {
		return w.cfg.SignerFor(keyID)
	}
	return w.cfg.Signer, nil
}

// redirectForbidden reports whether a redirect's target is one the
// transport's guard would refuse (when the transport is a guard), judged
// within the attempt's context.
func (w *Worker) redirectForbidden(ctx context.Context, resp *http.Response) bool {
	g, ok := w.cfg.Transport.(*guardTransport)
	if !ok {
		return false
	}
	loc, err := resp.Location()
	if err != nil {
		return false
	}
	return g.guard.check(ctx, loc) != nil
}

// redactURL keeps what identifies an endpoint and drops what may carry a
// credential: userinfo, query and fragment.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "invalid-url"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// drain reads a little of a body so the connection can be reused.
func drain(r io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(r, 4<<10)) }
