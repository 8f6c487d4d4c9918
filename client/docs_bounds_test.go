package client_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
)

// TestExponentialBackoffBoundsAsDocumented: ExponentialBackoff takes
// 0 < base <= limit and 0 <= jitter <= 1, the bounds themselves included,
// and panics one step past each, and on a jitter that is no number at all:
// a NaN jitter passed both comparisons and was taken silently as none, so
// deliveries that failed together retried together.
func TestExponentialBackoffBoundsAsDocumented(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		base, limit time.Duration
		jitter      float64
		panics      bool
	}{
		{"base at 1ns", time.Nanosecond, time.Second, 0, false},
		{"base 0", 0, time.Second, 0, true},
		{"base negative", -time.Second, time.Second, 0, true},
		{"limit at base", time.Second, time.Second, 0, false},
		{"limit one below base", time.Second, time.Second - 1, 0, true},
		{"jitter at 0", time.Second, time.Minute, 0, false},
		{"jitter just below 0", time.Second, time.Minute, math.Nextafter(0, -1), true},
		{"jitter at 1", time.Second, time.Minute, 1, false},
		{"jitter just over 1", time.Second, time.Minute, math.Nextafter(1, 2), true},
		{"jitter NaN", time.Second, time.Minute, math.NaN(), true},
		{"jitter +Inf", time.Second, time.Minute, math.Inf(1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b func(int, time.Duration) time.Duration
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				b = client.ExponentialBackoff(tc.base, tc.limit, tc.jitter)
				return false
			}()
			if panicked != tc.panics {
				t.Fatalf("ExponentialBackoff(%v, %v, %v) panicked: %v, want %v", tc.base, tc.limit, tc.jitter, panicked, tc.panics)
			}
			if panicked {
				return
			}
			for attempt := 1; attempt <= 3; attempt++ {
				if d := b(attempt, 0); d < time.Duration((1-tc.jitter)*float64(tc.base)) || d > tc.limit {
					t.Errorf("attempt %d waits %v, outside [%v less jitter, %v]", attempt, d, tc.base, tc.limit)
				}
			}
		})
	}
}

// TestDefaultBackoffIsAsDocumented: DefaultBackoff is Standard Webhooks'
// schedule, less up to a fifth: 5 seconds after the first attempt, then 5
// minutes, 30 minutes, 2 hours, 5 hours, and 10 hours after each attempt
// from the sixth on; a Retry-After is held within [5s, 10h] with up to a
// fifth more, never past 10h.
func TestDefaultBackoffIsAsDocumented(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt     int
		retryAfter  time.Duration
		least, most time.Duration
	}{
		{0, 0, 4 * time.Second, 5 * time.Second}, // no attempt yet: as after the first
		{1, 0, 4 * time.Second, 5 * time.Second},
		{2, 0, 4 * time.Minute, 5 * time.Minute},
		{3, 0, 24 * time.Minute, 30 * time.Minute},
		{4, 0, 96 * time.Minute, 2 * time.Hour},
		{5, 0, 4 * time.Hour, 5 * time.Hour},
		{6, 0, 8 * time.Hour, 10 * time.Hour},
		{7, 0, 8 * time.Hour, 10 * time.Hour},
		{1000, 0, 8 * time.Hour, 10 * time.Hour},
		{1, time.Millisecond, 5 * time.Second, 6 * time.Second},
		{1, 5 * time.Second, 5 * time.Second, 6 * time.Second},
		{3, 10 * time.Second, 10 * time.Second, 12 * time.Second},                       // the receiver's wait, not the schedule's
		{1, 9*time.Hour + 30*time.Minute, 9*time.Hour + 30*time.Minute, 10 * time.Hour}, // a fifth more would pass 10h
		{1, 10 * time.Hour, 10 * time.Hour, 10 * time.Hour},
		{1, 48 * time.Hour, 10 * time.Hour, 10 * time.Hour},
	} {
		for range 50 {
			if d := client.DefaultBackoff(tc.attempt, tc.retryAfter); d < tc.least || d > tc.most {
				t.Fatalf("DefaultBackoff(%d, %v) = %v, want within [%v, %v]", tc.attempt, tc.retryAfter, d, tc.least, tc.most)
			}
		}
	}
}

// TestDefaultScheduleSpansAsDocumented: a delivery whose receiver stays
// down is tried, under DefaultBackoff and the default budget of 8
// attempts, for about 27 hours (Standard Webhooks' 27h35m5s, less up to a
// fifth): an outage of a few hours costs it nothing, and its last attempt
// comes well inside the default 72-hour retry horizon. (The budget of an
// earlier default, ExponentialBackoff(5s, 1h, 0.2), was spent about 10
// minutes after the first attempt.)
func TestDefaultScheduleSpansAsDocumented(t *testing.T) {
	t.Parallel()
	const attempts = 8 // store.Config.MaxAttempts' default
	most := 27*time.Hour + 35*time.Minute + 5*time.Second
	least := most * 4 / 5
	for range 50 {
		var span time.Duration
		for attempt := 1; attempt < attempts; attempt++ {
			span += client.DefaultBackoff(attempt, 0)
		}
		if span < least || span > most || span >= 72*time.Hour {
			t.Fatalf("%d attempts span %v, want within [%v, %v], inside the 72-hour horizon", attempts, span, least, most)
		}
	}
}

// TestClassifyAtTheStatusBounds: DefaultClassify's table at the edges of
// each range it names, and RetryClientErrors' at the edges of the 4xx it
// retries.
func TestClassifyAtTheStatusBounds(t *testing.T) {
	t.Parallel()
	fail := func(c courier.Code) client.Verdict { return client.Verdict{Code: c} }
	retry := func(c courier.Code) client.Verdict { return client.Verdict{Retry: true, Code: c} }
	for _, tc := range []struct {
		status        int
		def, retry4xx client.Verdict
	}{
		{99, fail(courier.CodeReceiverRejected), fail(courier.CodeReceiverRejected)},
		{100, fail(courier.CodeReceiverRejected), fail(courier.CodeReceiverRejected)},
		{101, fail(courier.CodeReceiverRejected), fail(courier.CodeReceiverRejected)},
		{199, fail(courier.CodeReceiverRejected), fail(courier.CodeReceiverRejected)},
		{300, fail(courier.CodeRedirect), fail(courier.CodeRedirect)},
		{399, fail(courier.CodeRedirect), fail(courier.CodeRedirect)},
		{400, fail(courier.CodeReceiverRejected), retry(courier.CodeReceiverRejected)},
		{401, fail(courier.CodeSignatureRejected), fail(courier.CodeSignatureRejected)},
		{407, fail(courier.CodeReceiverRejected), retry(courier.CodeReceiverRejected)},
		{408, retry(courier.CodeRequestTimeout), retry(courier.CodeRequestTimeout)},
		{409, fail(courier.CodeReceiverRejected), retry(courier.CodeReceiverRejected)},
		{410, fail(courier.CodeEndpointGone), fail(courier.CodeEndpointGone)},
		{424, fail(courier.CodeReceiverRejected), retry(courier.CodeReceiverRejected)},
		{425, retry(courier.CodeRequestTimeout), retry(courier.CodeRequestTimeout)},
		{428, fail(courier.CodeReceiverRejected), retry(courier.CodeReceiverRejected)},
		{429, retry(courier.CodeRateLimited), retry(courier.CodeRateLimited)},
		{499, fail(courier.CodeReceiverRejected), retry(courier.CodeReceiverRejected)},
		{500, retry(courier.CodeReceiverUnavailable), retry(courier.CodeReceiverUnavailable)},
		{599, retry(courier.CodeReceiverUnavailable), retry(courier.CodeReceiverUnavailable)},
		{600, fail(courier.CodeReceiverRejected), fail(courier.CodeReceiverRejected)},
		{999, fail(courier.CodeReceiverRejected), fail(courier.CodeReceiverRejected)},
	} {
		resp := &http.Response{StatusCode: tc.status}
		if got := client.DefaultClassify(resp, nil); got != tc.def {
			t.Errorf("DefaultClassify(%d) = %+v, want %+v", tc.status, got, tc.def)
		}
		if got := client.RetryClientErrors(resp, nil); got != tc.retry4xx {
			t.Errorf("RetryClientErrors(%d) = %+v, want %+v", tc.status, got, tc.retry4xx)
		}
	}
}
