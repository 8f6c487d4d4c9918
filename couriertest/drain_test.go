package couriertest_test

import (
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestDrainSeesPastDeliveriesItsClaimsEnd: a claim may end deliveries
// rather than lease them (those of a paused subscription are suppressed),
// and a Work whose whole batch was ended so claims nothing. Drain went on
// only while Work claimed, so it returned with most of such a backlog
// still due.
func TestDrainSeesPastDeliveriesItsClaimsEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }), nil)
	t.Cleanup(srv.Close)
	sub, err := s.Subscriptions.Create(ctx, nil, store.SubscriptionParams{Tenant: "acme", Endpoint: srv.URL, EventTypes: []string{"*"}, KeyID: "k"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Outbox.Publish(ctx, tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "e-" + strconv.Itoa(i), Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	p := sub.SubscriptionParams
	p.Paused = true
	if _, err := s.Subscriptions.Update(ctx, nil, sub.ID, p); err != nil {
		t.Fatal(err)
	}
	keys := couriertest.StandardWebhooksKeys("orders")
	w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer, Transport: srv.Guard().Transport(), Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	h, err := s.Outbox.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Due != 0 || h.Counts[courier.StatusSuppressed] != n {
		t.Fatalf("after Drain: %d due, %d suppressed; want none due and all %d suppressed", h.Due, h.Counts[courier.StatusSuppressed], n)
	}
}
