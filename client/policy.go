package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/courier-go/courier"
)

// Verdict is what becomes of an attempt that did not succeed: retried
// after a backoff, or failed for good, with a stable code either way.
//
// Code may be left empty: a Code that is empty or not a valid
// courier.Code is replaced by DefaultClassify's code for the same answer
// or error (Retry stays as given), so Verdict{Retry: true} on a 503 is
// retried as receiver_unavailable and on a reset as network_error. A 3xx
// whose Location the transport's Guard refuses is recorded
// destination_forbidden whatever the Code (Retry stands): the attempts
// log and the alerts on it see a receiver pointing the worker inward.
//
// The endpoint's circuit breaker (store.BreakerConfig) reads the answer
// and the code: an answer of 5xx, 408, 425 or 429 counts against the
// endpoint whatever the Code, and so does any failure whose Code is one
// of DefaultClassify's for an unhealthy endpoint (receiver_unavailable,
// request_timeout, rate_limited, timeout, network_error), a 4xx given one
// too; code endpoint_gone (a 410's) disables the endpoint. Any other
// answer (a 4xx, a 3xx) shows it up. A request that got no answer (resp
// nil) with another code (one of one's own, destination_forbidden) says
// nothing of the endpoint's health.
type Verdict struct {
	Retry bool
	Code  courier.Code
}

// DefaultClassify is the default Config.Classify. It judges an attempt
// that got no acknowledgement: resp is the receiver's non-2xx answer, or
// nil when the request failed with err (err is then never nil).
//
//	no response: destination refused by the guard  fail   destination_forbidden
//	             the attempt's timeout              retry  timeout
//	             anything else (refused, reset,     retry  network_error
//	             a status not of three digits)
//	408, 425                                        retry  request_timeout
//	429                                             retry  rate_limited
//	500..599                                        retry  receiver_unavailable
//	3xx (redirects are never followed)              fail   redirect_refused
//	401 (the receiver refused the signature)        fail   signature_rejected
//	410                                             fail   endpoint_gone
//	any other 4xx                                   fail   receiver_rejected
//	below 100, a final 1xx (101), 600 and above     fail   receiver_rejected
//
// A 2xx is never classified: the receiver's Ack decides it (an Ack that
// does not prove receipt fails with ack_invalid).
func DefaultClassify(resp *http.Response, err error) Verdict {
	if resp == nil {
		switch {
		case errors.Is(err, courier.CodeDestinationForbidden):
			return Verdict{Code: courier.CodeDestinationForbidden}
		case errors.Is(err, context.DeadlineExceeded):
			return Verdict{Retry: true, Code: courier.CodeTimeout}
		}
		return Verdict{Retry: true, Code: courier.CodeNetwork}
	}
	switch s := resp.StatusCode; {
	case s == http.StatusRequestTimeout || s == http.StatusTooEarly:
		return Verdict{Retry: true, Code: courier.CodeRequestTimeout}
	case s == http.StatusTooManyRequests:
		return Verdict{Retry: true, Code: courier.CodeRateLimited}
	case s >= 500 && s < 600:
		return Verdict{Retry: true, Code: courier.CodeReceiverUnavailable}
	case s >= 300 && s < 400:
		return Verdict{Code: courier.CodeRedirect}
	case s == http.StatusUnauthorized:
		return Verdict{Code: courier.CodeSignatureRejected}
	case s == http.StatusGone:
		return Verdict{Code: courier.CodeEndpointGone}
	}
	return Verdict{Code: courier.CodeReceiverRejected}
}

// RetryClientErrors is DefaultClassify, except that a 4xx answer other
// than 401 and 410 is retried (code receiver_rejected) rather than failed.
// It suits receivers that may deploy a bug: a 400 from a broken release is
// retried until the receiver is fixed, or until the delivery's budget or
// deadline ends. The cost: a notification the receiver will never accept
// spends its whole budget, or waits for its deadline, before it fails.
func RetryClientErrors(resp *http.Response, err error) Verdict {
	v := DefaultClassify(resp, err)
	if v.Code == courier.CodeReceiverRejected && resp != nil && resp.StatusCode >= 400 && resp.StatusCode < 500 {
		v.Retry = true
	}
	return v
}

// DefaultBackoff is the default Config.Backoff: Standard Webhooks' retry
// schedule. After the first attempt fails the next waits 5 seconds, then 5
// minutes, 30 minutes, 2 hours, 5 hours, and 10 hours after each attempt
// from the sixth on, less up to a fifth at random, so that deliveries
// failed together do not retry together. With the default budget of 8
// attempts (store.Config.MaxAttempts) a delivery whose receiver stays down
// is tried for about 27 hours, well inside the 72-hour retry horizon,
// before it fails for good; a receiver's outage of a few hours costs it
// nothing. A receiver's Retry-After is honoured within [5 seconds, 10
// hours], with up to a fifth more, never past 10 hours. For retries
// sooner than the schedule's, as a test or a receiver on the same network
// may want, give the worker an ExponentialBackoff.
func DefaultBackoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return honourRetryAfter(retryAfter, defaultSchedule[0], defaultSchedule[len(defaultSchedule)-1], defaultJitter)
	}
	return lessJitter(defaultSchedule[min(max(attempt, 1), len(defaultSchedule))-1], defaultJitter)
}

// defaultSchedule is DefaultBackoff's wait after attempt i+1 fails, the
// last for every attempt after it too.
var defaultSchedule = [...]time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour}

// defaultJitter is the fraction of a wait DefaultBackoff takes off at
// random, or adds to a Retry-After.
const defaultJitter = 0.2

// ExponentialBackoff returns a Config.Backoff that doubles the delay from
// base with each attempt, up to limit, and takes up to jitter (a fraction,
// 0..1) of it off at random, so that deliveries failed together do not
// retry together. A receiver's Retry-After is honoured, clamped to
// [base, limit], and up to jitter of it is added rather than taken off, so
// that deliveries asked to wait together come back spread out, none
// before the time asked (within limit). It panics unless
// 0 < base <= limit and 0 <= jitter <= 1.
//
// Mind the budget beside it: a delivery has store.Config.MaxAttempts
// attempts, and ExponentialBackoff(5*time.Second, time.Hour, 0.2) spends 8
// of them about 10 minutes after the first.
func ExponentialBackoff(base, limit time.Duration, jitter float64) func(attempt int, retryAfter time.Duration) time.Duration {
	if base <= 0 || limit < base || !(jitter >= 0 && jitter <= 1) { // NaN too
		panic("client: ExponentialBackoff needs 0 < base <= limit and 0 <= jitter <= 1")
	}
	return func(attempt int, retryAfter time.Duration) time.Duration {
		if retryAfter > 0 {
			return honourRetryAfter(retryAfter, base, limit, jitter)
		}
		d := base
		for i := 1; i < attempt && d < limit; i++ {
			if d > limit/2 { // doubled, it would pass limit, or wrap negative
				d = limit
				break
			}
			d *= 2
		}
		return lessJitter(d, jitter)
	}
}

// honourRetryAfter is the wait a receiver's Retry-After asks for, held
// within [base, limit], with up to jitter of it more, never past limit.
func honourRetryAfter(retryAfter, base, limit time.Duration, jitter float64) time.Duration {
	d := min(max(retryAfter, base), limit)
	if more := time.Duration(rand.Float64() * jitter * float64(d)); more > 0 {
		d += min(more, limit-d) // never past limit, nor wrapped
	}
	return d
}

// lessJitter is d less up to jitter of it, at random.
func lessJitter(d time.Duration, jitter float64) time.Duration {
	if jitter > 0 {
		d -= time.Duration(rand.Float64() * jitter * float64(d))
	}
	return max(d, 0)
}

// maxRetryAfter bounds a delay-seconds Retry-After (about 34 years):
// Backoff clamps it further.
const maxRetryAfter = 1 << 30

// retryAfter parses a Retry-After header: delay-seconds (digits only, RFC
// 9110: no sign; a number too large for int64 is taken as the largest) or
// an HTTP date, read on clock (the worker's Config.Now).
func retryAfter(v string, clock func() time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil { // digits only: out of range
			s = maxRetryAfter
		}
		return time.Duration(min(s, maxRetryAfter)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if now := clock(); t.After(now) {
			return t.Sub(now)
		}
	}
	return 0
}
