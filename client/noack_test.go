package client_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/store"
)

// TestNoAckEndpointSucceedsOnAny2xx: a delivery to an endpoint registered
// without an Ack (profile none, as AdCP and Standard Webhooks receivers
// answer) succeeds on any 2xx, whatever its body, while the same answer to
// an endpoint that owes courier's Ack fails ack_invalid, not retried: it
// proves no receipt of the bytes sent.
func TestNoAckEndpointSucceedsOnAny2xx(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		body   string
	}{{200, ""}, {200, "not an ack"}, {201, `{"schema":"courier.ack.v1"}`}, {202, ""}, {204, ""}, {299, "ok"}} {
		t.Run(strconv.Itoa(tc.status)+" "+tc.body, func(t *testing.T) {
			t.Parallel()
			answer := func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}
			for profile, want := range map[string]struct {
				status courier.Status
				code   courier.Code
			}{
				ack.ProfileNone:    {courier.StatusSucceeded, ""},
				ack.ProfileCourier: {courier.StatusFailed, courier.CodeAckInvalid},
			} {
				b := setupWorker(t, answer, nil)
				id := b.enqueueWith(t, "n-1", func(p *store.EnqueueParams) { p.Profile = profile })
				b.work(t)
				if d := b.get(t, id); d.Status != want.status || d.LastErrorCode != want.code || d.LastHTTPStatus != tc.status || d.Attempts != 1 {
					t.Errorf("profile %s: %s %q after %d attempts (last status %d); want %s %q after 1",
						profile, d.Status, d.LastErrorCode, d.Attempts, d.LastHTTPStatus, want.status, want.code)
				}
			}
		})
	}
}
