package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/store"
)

// terminalNote returns a terminal notification of event with the given
// status, and its enqueue parameters.
func terminalNote(t *testing.T, event, status string) store.EnqueueParams {
	t.Helper()
	var lifecycle *string
	if status != "cancelled" && status != "superseded" {
		lifecycle = ptr(strings.Repeat("c", 64))
	}
	n, err := ack.NewTerminal(ack.Terminal{
		EventID: event, SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1", SourceSequence: "1", JobCount: "1",
		ChangeSHA256: strings.Repeat("a", 64), LifecycleBindingSHA256: strings.Repeat("b", 64),
		TerminalStatus: status, LifecycleSHA256: lifecycle,
	})
	if err != nil {
		t.Fatalf("NewTerminal: %v", err)
	}
	payload, err := canonical.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return store.EnqueueParams{NotificationID: n.NotificationID, Endpoint: "https://cms.example/terminal", Payload: payload, Profile: ack.ProfileTerminal}
}

func ptr[T any](v T) *T { return &v }

// testTerminalNotificationsAreKeyedByEvent: the outbox refuses a second,
// different terminal notification for an event it holds one for at that
// endpoint (CodeIdempotencyCollision, nothing written), as the reference
// keys them by event_id; the same notification again is a no-op, and
// other endpoints and other events are other deliveries.
func testTerminalNotificationsAreKeyedByEvent(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	published := terminalNote(t, "evt-1", "published")
	first := b.enqueue(t, published)
	if again := b.enqueue(t, published); !again.Existed || again.ID != first.ID {
		t.Fatalf("same terminal notification again = %+v, want the existing row %d", again, first.ID)
	}
	failed := terminalNote(t, "evt-1", "publication_failed")
	if failed.NotificationID == published.NotificationID {
		t.Fatal("two statuses made one notification id")
	}
	collides := func(name string, p store.EnqueueParams) {
		t.Helper()
		tx := b.begin(t)
		defer tx.Rollback()
		if _, err := b.store.Outbox.Enqueue(b.ctx, tx, p); !errors.Is(err, courier.CodeIdempotencyCollision) {
			t.Fatalf("%s: Enqueue = %v, want CodeIdempotencyCollision", name, err)
		}
	}
	collides("another status for the event", failed)

	// Within one transaction too.
	tx := b.begin(t)
	_, err := b.store.Outbox.EnqueueMany(b.ctx, tx, []store.EnqueueParams{terminalNote(t, "evt-2", "published"), terminalNote(t, "evt-2", "cancelled")})
	tx.Rollback()
	if !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("two notifications for one event in one batch = %v, want CodeIdempotencyCollision", err)
	}

	// Another endpoint, another event: other deliveries.
	elsewhere := failed
	elsewhere.Endpoint = "https://other-cms.example/terminal"
	if e := b.enqueue(t, elsewhere); e.Existed {
		t.Fatal("the event's notification to another endpoint reported as existing")
	}
	if e := b.enqueue(t, terminalNote(t, "evt-3", "publication_failed")); e.Existed {
		t.Fatal("another event's notification reported as existing")
	}

	// Delivered or not, the event stays taken.
	c := b.claim(t, "w", 10, time.Minute)
	for _, d := range c {
		if err := b.complete(d.Lease, "ack"); err != nil {
			t.Fatal(err)
		}
	}
	collides("another status after delivery", failed)
	if h := health(t, b); h.Counts[courier.StatusSucceeded] != 3 || h.Counts[courier.StatusPending] != 0 {
		t.Fatalf("health counts %v, want the 3 accepted notifications and nothing else", h.Counts)
	}
	if d := b.get(t, first.ID); d.NotificationID != published.NotificationID || string(d.Payload) != string(published.Payload) {
		t.Fatal("the first notification's row changed")
	}
}

// testTerminalPayloadIsValidated: a terminal delivery is a valid terminal
// notification sent under its own notification_id, or Enqueue refuses it
// with code invalid_argument naming what is wrong, never its content.
func testTerminalPayloadIsValidated(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	good := terminalNote(t, "evt-1", "published")
	for name, edit := range map[string]func(p *store.EnqueueParams){
		"another notification id": func(p *store.EnqueueParams) { p.NotificationID = "terminal-other" },
		"member missing": func(p *store.EnqueueParams) {
			p.Payload = []byte(strings.Replace(string(p.Payload), `"job_count":1,`, "", 1))
		},
		"tampered content": func(p *store.EnqueueParams) {
			p.Payload = []byte(strings.Replace(string(p.Payload), `"site_id":"site-1"`, `"site_id":"site-2"`, 1))
		},
		"not an object": func(p *store.EnqueueParams) { p.Payload = []byte(`["site-1"]`) },
	} {
		p := good
		edit(&p)
		tx := b.begin(t)
		_, err := b.store.Outbox.Enqueue(b.ctx, tx, p)
		tx.Rollback()
		if courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Fatalf("%s: Enqueue = %v, want invalid_argument", name, err)
		}
		if strings.Contains(err.Error(), "site-") {
			t.Fatalf("%s: the error quotes the payload: %v", name, err)
		}
	}
}

// testTerminal runs the terminal profile's store tests.
func testTerminal(t *testing.T, open OpenFunc) {
	for name, fn := range map[string]func(*testing.T, OpenFunc){
		"KeyedByEvent":     testTerminalNotificationsAreKeyedByEvent,
		"PayloadValidated": testTerminalPayloadIsValidated,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open)
		})
	}
}
