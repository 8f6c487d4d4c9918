package client_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/store"
)

// TestAPublishThatSendsADeliveryAgainWakesTheWorker: a publish again of
// an event whose delivery a claim suppressed (its subscription was
// paused) sends it again in place, an UPDATE rather than an insert. On
// SQLite only an insert woke the workers of the process, so a running
// worker found it at its next poll, up to PollInterval later (PostgreSQL's
// pg_notify woke them). It wakes them as the publish commits: here, with a
// poll an hour away, the delivery arrives all the same.
func TestAPublishThatSendsADeliveryAgainWakesTheWorker(t *testing.T) {
	t.Parallel()
	arrived := make(chan string, 10)
	release := make(chan struct{})
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		arrived <- id
		if id == "plain" {
			select { // held, so that no attempt ending calls for a claim
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Write(ack.New(id, body).Marshal())
	}, func(c *client.Config) {
		c.PollInterval = time.Hour // only a wake-up can bring the delivery sent again
		c.Timeout = 30 * time.Second
	})
	ctx := t.Context()
	sub := store.SubscriptionParams{Tenant: "acme", Endpoint: b.server.URL + "/hooks", EventTypes: []string{"order.paid"}, KeyID: "k1"}
	created, err := b.store.Subscriptions.Create(ctx, b.store.DB(), sub)
	if err != nil {
		t.Fatal(err)
	}
	publish := func() store.Published {
		t.Helper()
		tx, err := b.store.DB().BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		p, err := b.store.Outbox.Publish(ctx, tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{"order":1}`)})
		if err != nil || len(p) != 1 {
			t.Fatalf("Publish = %v, %v; want one delivery", p, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return p[0]
	}
	first := publish()
	sub.Paused = true
	if _, err := b.store.Subscriptions.Update(ctx, b.store.DB(), created.ID, sub); err != nil {
		t.Fatal(err)
	}
	if _, err := b.worker.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if d := b.get(t, first.ID); d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeSubscriptionChanged {
		t.Fatalf("the delivery to the paused subscription is %s/%s, want suppressed/subscription_changed", d.Status, d.LastErrorCode)
	}

	runCtx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- b.worker.Run(runCtx) }()
	defer func() {
		close(release)
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	// A plain enqueue, woken as ever: the worker runs, and with its
	// attempt held by the receiver, waits for a wake-up, the attempt's
	// end or its poll.
	b.enqueue(t, "plain", `{}`)
	select {
	case got := <-arrived:
		if got != "plain" {
			t.Fatalf("arrived %s, want plain", got)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the plain enqueue did not arrive within 20s: an insert no longer wakes the worker")
	}

	sub.Paused = false
	if _, err := b.store.Subscriptions.Update(ctx, b.store.DB(), created.ID, sub); err != nil {
		t.Fatal(err)
	}
	again := publish()
	if again.ID != first.ID || again.Existed {
		t.Fatalf("publish again = %+v, want delivery %d sent again", again, first.ID)
	}
	select {
	case got := <-arrived:
		if got != again.NotificationID {
			t.Fatalf("arrived %s, want %s", got, again.NotificationID)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the delivery sent again did not arrive within 20s: the worker was not woken, and waits for its poll (an hour)")
	}
}
