package client_test

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/logkey"
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

// TestAckInvalidSaysWhyInTheLog: a delivery that fails ack_invalid is most
// often one of the default profile sent to a receiver that is no courier
// receiver, which answers an empty 2xx. The worker's line for it says
// whether the answer had a body and, when it had none, that such a
// receiver takes profile none; never what the body held.
func TestAckInvalidSaysWhyInTheLog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"empty", "", []string{"no body", "profile courier", "profile none"}},
		{"not an ack", `{"ok":"SECRETBODY"}`, []string{"not the Ack", "profile courier"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := newCapture(t)
			b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte(tc.body))
			}, func(c *client.Config) { c.Logger = slog.New(logs) })
			id := b.enqueue(t, "n-1", `{"n":1}`)
			b.work(t)
			if d := b.get(t, id); d.LastErrorCode != courier.CodeAckInvalid {
				t.Fatalf("delivery ended %s %q, want ack_invalid", d.Status, d.LastErrorCode)
			}
			lines := logs.lines("worker: delivery failed")
			if len(lines) != 1 {
				t.Fatalf("%d lines worker: delivery failed, want 1", len(lines))
			}
			why := lines[0].Attrs[logkey.Error]
			for _, w := range tc.want {
				if !strings.Contains(why, w) {
					t.Errorf("the line's error %q does not say %q", why, w)
				}
			}
			if strings.Contains(why, "SECRETBODY") {
				t.Errorf("the line's error %q shows the answer's body", why)
			}
		})
	}
}
