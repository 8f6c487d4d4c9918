package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// terminal returns plan's terminal notification of sequence seq, as the
// sender example enqueues them.
func terminal(t *testing.T, plan, seq string) ack.Terminal {
	t.Helper()
	lifecycle := ack.Digest([]byte(plan + "/" + seq))
	n, err := ack.NewTerminal(ack.Terminal{
		EventID: plan + "-" + seq, SiteID: "site-1", PlanID: plan, WebsiteVersion: "v1",
		SourceSequence: json.Number(seq), JobCount: "1", ChangeSHA256: ack.Digest([]byte(plan)),
		LifecycleBindingSHA256: ack.Digest([]byte("binding")), TerminalStatus: "published", LifecycleSHA256: &lifecycle,
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReceiverKeepsNewestPlanState: a plan's state was overwritten by
// whichever of its notifications arrived last, so a retried older one
// (the worker delivers concurrently and retries after newer ones
// succeeded) set the plan back. The state now moves forward only, by
// source_sequence; the older notification is still accepted.
func TestReceiverKeepsNewestPlanState(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "receiver.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys := couriertest.StandardWebhooksKeys("sender")
	h, err := newHandler(ctx, s, keys.Verifier, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var sent []ack.Terminal
	for _, seq := range []string{"10", "9", "100000000000000000000", "99"} { // the third beyond 64 bits
		n := terminal(t, "plan-1", seq)
		sent = append(sent, n)
		payload, err := n.Payload()
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, couriertest.NewRequest("http://receiver.test/terminal", n.NotificationID, payload, keys.Signer))
		if rec.Code != http.StatusOK {
			t.Fatalf("sequence %s: %d %s", seq, rec.Code, rec.Body)
		}
	}
	var got string
	if err := s.DB().GetContext(ctx, &got, "SELECT notification_id FROM plan_states WHERE plan_id = 'plan-1'"); err != nil {
		t.Fatal(err)
	}
	if want := sent[2].NotificationID; got != want {
		for _, n := range sent {
			if n.NotificationID == got {
				t.Fatalf("plan-1's state is sequence %s's notification, want sequence %s's", n.SourceSequence, sent[2].SourceSequence)
			}
		}
		t.Fatalf("plan-1's state is notification %q, want %s", got, want)
	}
}
