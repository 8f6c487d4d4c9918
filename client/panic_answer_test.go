package client_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
)

// TestAPanicAfterTheAnswerKeepsItsStatus: the receiver answered 503, and
// the configuration's function that judges the answer panicked. The
// attempt is retried with code internal_error, as any attempt whose
// callback panicked, but the receiver did answer: its status is recorded
// on the delivery, the attempts log and the Event, and the 503 counts
// against the endpoint's breaker as it does whatever the code. Recorded
// without it, the attempt read as one that never got an answer, and an
// outage behind a panicking policy never opened the breaker.
func TestAPanicAfterTheAnswerKeepsItsStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*client.Config)
	}{
		{"Classify", func(c *client.Config) {
			c.Classify = func(*http.Response, error) client.Verdict { panic("a bug in the application's policy") }
		}},
		{"Backoff", func(c *client.Config) {
			c.Backoff = func(int, time.Duration) time.Duration { panic("a bug in the application's backoff") }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupWorker(t, statusHandler(http.StatusServiceUnavailable, ""), tt.edit)
			id := b.enqueue(t, "n-1", `{}`)
			e := b.work(t)
			if e.Code != courier.CodeInternal || e.HTTPStatus != http.StatusServiceUnavailable {
				t.Errorf("event %s (HTTP %d), want internal_error (HTTP 503)", e.Code, e.HTTPStatus)
			}
			d := b.get(t, id)
			if d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeInternal || d.LastHTTPStatus != http.StatusServiceUnavailable {
				t.Errorf("delivery %s/%s (HTTP %d), want retry_wait/internal_error (HTTP 503)", d.Status, d.LastErrorCode, d.LastHTTPStatus)
			}
			atts, err := b.store.Outbox.Attempts(t.Context(), id)
			if err != nil || len(atts) != 1 || atts[0].HTTPStatus != http.StatusServiceUnavailable {
				t.Errorf("attempts %+v, %v; want one with HTTP 503", atts, err)
			}
			h, err := b.store.Endpoints.Get(t.Context(), d.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			if h.ConsecutiveFailures != 1 {
				t.Errorf("the endpoint has %d failures after a 503, want 1", h.ConsecutiveFailures)
			}
		})
	}
}
