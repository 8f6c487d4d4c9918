package client_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
)

func TestExponentialBackoff(t *testing.T) {
	t.Parallel()
	b := client.ExponentialBackoff(2*time.Second, 30*time.Second, 0)
	for attempt, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 4: 16 * time.Second, 5: 30 * time.Second, 50: 30 * time.Second} {
		if got := b(attempt, 0); got != want {
			t.Errorf("attempt %d: %v, want %v", attempt, got, want)
		}
	}
	// Retry-After is honoured, clamped to [base, cap].
	for _, tc := range []struct{ retryAfter, want time.Duration }{
		{10 * time.Second, 10 * time.Second},
		{time.Hour, 30 * time.Second},
		{time.Millisecond, 2 * time.Second},
	} {
		if got := b(3, tc.retryAfter); got != tc.want {
			t.Errorf("Retry-After %v: %v, want %v", tc.retryAfter, got, tc.want)
		}
	}
	// Jitter takes at most its share off.
	j := client.ExponentialBackoff(time.Second, time.Minute, 0.5)
	for range 200 {
		if d := j(3, 0); d > 4*time.Second || d < 2*time.Second {
			t.Fatalf("jittered delay %v outside [2s, 4s]", d)
		}
	}
}

// TestRetryAfterIsJitteredLater: deliveries a receiver asked to come
// back after the same Retry-After (a 503 or 429 to a burst of them) do not
// come back together: each waits at least what was asked, and up to
// jitter of it more, never past the limit.
func TestRetryAfterIsJitteredLater(t *testing.T) {
	t.Parallel()
	j := client.ExponentialBackoff(time.Second, time.Minute, 0.2)
	seen := map[time.Duration]bool{}
	for range 200 {
		d := j(1, 10*time.Second)
		if d < 10*time.Second || d > 12*time.Second {
			t.Fatalf("Retry-After 10s with jitter 0.2: %v, want within [10s, 12s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatalf("200 retries after the same Retry-After all wait %v: they retry together", j(1, 10*time.Second))
	}
	if d := j(1, 55*time.Second); d < 55*time.Second || d > time.Minute {
		t.Fatalf("Retry-After 55s, limit 1m: %v, want within [55s, 1m]", d)
	}
}

// TestExponentialBackoffNeverWrapsToNone: a limit beyond half the largest
// duration (math.MaxInt64, for "no cap") is reached, not overflowed: the
// delay doubled past it wrapped negative and was taken as none, a retry at
// once, from the 35th attempt of a one-second base on.
func TestExponentialBackoffNeverWrapsToNone(t *testing.T) {
	t.Parallel()
	for _, base := range []time.Duration{time.Nanosecond, time.Second, 3 * time.Second} {
		b := client.ExponentialBackoff(base, math.MaxInt64, 0)
		prev := time.Duration(0)
		for attempt := 1; attempt <= 1000; attempt++ {
			d := b(attempt, 0)
			if d < prev {
				t.Fatalf("base %v: attempt %d waits %v, less than attempt %d's %v", base, attempt, d, attempt-1, prev)
			}
			prev = d
		}
		if prev != math.MaxInt64 {
			t.Errorf("base %v: attempt 1000 waits %v, want the limit %v", base, prev, time.Duration(math.MaxInt64))
		}
	}
}

func TestDefaultClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		err    error
		want   client.Verdict
	}{
		{err: fmt.Errorf("dial: %w", courier.CodeDestinationForbidden), want: client.Verdict{Code: courier.CodeDestinationForbidden}},
		{err: fmt.Errorf("post: %w", context.DeadlineExceeded), want: client.Verdict{Retry: true, Code: courier.CodeTimeout}},
		{err: errors.New("connection reset"), want: client.Verdict{Retry: true, Code: courier.CodeNetwork}},
		{status: 408, want: client.Verdict{Retry: true, Code: courier.CodeRequestTimeout}},
		{status: 425, want: client.Verdict{Retry: true, Code: courier.CodeRequestTimeout}},
		{status: 429, want: client.Verdict{Retry: true, Code: courier.CodeRateLimited}},
		{status: 500, want: client.Verdict{Retry: true, Code: courier.CodeReceiverUnavailable}},
		{status: 599, want: client.Verdict{Retry: true, Code: courier.CodeReceiverUnavailable}},
		{status: 600, want: client.Verdict{Code: courier.CodeReceiverRejected}},
		{status: 999, want: client.Verdict{Code: courier.CodeReceiverRejected}},
		{status: 101, want: client.Verdict{Code: courier.CodeReceiverRejected}}, // a final 1xx: no answer to judge
		{status: 302, want: client.Verdict{Code: courier.CodeRedirect}},
		{status: 401, want: client.Verdict{Code: courier.CodeSignatureRejected}},
		{status: 410, want: client.Verdict{Code: courier.CodeEndpointGone}},
		{status: 400, want: client.Verdict{Code: courier.CodeReceiverRejected}},
		{status: 422, want: client.Verdict{Code: courier.CodeReceiverRejected}},
	} {
		var resp *http.Response
		if tc.err == nil {
			resp = &http.Response{StatusCode: tc.status}
		}
		if got := client.DefaultClassify(resp, tc.err); got != tc.want {
			t.Errorf("status %d err %v: %+v, want %+v", tc.status, tc.err, got, tc.want)
		}
	}
}

// TestRetryClientErrors: the lenient policy retries 4xx answers, except
// the two that speak of the endpoint or the signature.
func TestRetryClientErrors(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]client.Verdict{
		400: {Retry: true, Code: courier.CodeReceiverRejected},
		404: {Retry: true, Code: courier.CodeReceiverRejected},
		422: {Retry: true, Code: courier.CodeReceiverRejected},
		401: {Code: courier.CodeSignatureRejected},
		410: {Code: courier.CodeEndpointGone},
		302: {Code: courier.CodeRedirect},
		600: {Code: courier.CodeReceiverRejected},
		503: {Retry: true, Code: courier.CodeReceiverUnavailable},
	} {
		if got := client.RetryClientErrors(&http.Response{StatusCode: status}, nil); got != want {
			t.Errorf("status %d: %+v, want %+v", status, got, want)
		}
	}
}

// TestNegativeBackoffRetriesAtOnce: a Backoff that returns a negative
// delay retries the delivery at once; the outcome is not refused (which
// would leave it leased until its lease ran out).
func TestNegativeBackoffRetriesAtOnce(t *testing.T) {
	t.Parallel()
	b := setupWorker(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
		func(c *client.Config) { c.Backoff = func(int, time.Duration) time.Duration { return -time.Hour } })
	id := b.enqueue(t, "n-1", `{"n":1}`)
	if e := b.work(t); e.Status != courier.StatusRetryWait || e.Code != courier.CodeReceiverUnavailable {
		t.Fatalf("event = %+v, want retry_wait receiver_unavailable", e)
	}
	if d := b.get(t, id); d.Status != courier.StatusRetryWait || !d.NextAttemptAt.Equal(b.clock.Now()) {
		t.Fatalf("delivery = %s due %v, want retry_wait due now (%v)", d.Status, d.NextAttemptAt, b.clock.Now())
	}
}
