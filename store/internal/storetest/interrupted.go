package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/store"
)

// interrupting is a bundle whose enqueues can be interrupted between a
// delivery's insert and its ordering key's join: the context interrupt
// returns ends as the insert's span ends, before the join.
type interrupting struct {
	*bundle
	cancel context.CancelFunc
}

func setupInterrupting(t *testing.T, open OpenFunc) *interrupting {
	b := &interrupting{}
	b.bundle = setup(t, open, store.Config{Tracer: &tracingtest.Recorder{OnEnd: func(s *tracingtest.Span) {
		if s.Name == tracing.SpanEnqueue && b.cancel != nil {
			b.cancel()
			b.cancel = nil
		}
	}}})
	return b
}

// interrupt returns a context that ends after the next delivery's insert.
func (b *interrupting) interrupt() context.Context {
	var ctx context.Context
	ctx, b.cancel = context.WithCancel(b.ctx)
	return ctx
}

// testEnqueueRetriedInItsTransactionJoinsItsOrderingKey: an enqueue of a
// delivery with an ordering key that fails between its insert and its
// key's join (its context ended), in a transaction the application goes
// on with, retries there (a repeat is harmless) and commits, leaves the
// delivery sent as its key's head: the retry, finding the delivery
// waiting for its key, joins it. Through Enqueue, EnqueueMany (failed by
// a later delivery's collision, then retried) and Publish alike.
func testEnqueueRetriedInItsTransactionJoinsItsOrderingKey(t *testing.T, open OpenFunc) {
	b := setupInterrupting(t, open)
	sub, err := b.store.Subscriptions.Create(b.ctx, b.db, subscription("t", "https://sub.example/hooks", "k", "order.updated"))
	if err != nil {
		t.Fatal(err)
	}
	// A delivery the EnqueueMany below collides with, after its first.
	other := keyed("m-2", "order-m2")
	b.enqueue(t, other)
	collides := other
	collides.Payload = []byte(`{"changed":true}`)

	for _, c := range []struct {
		name  string
		id    string // the interrupted delivery's notification id
		first func(tx *sqlx.Tx) error
		retry func(tx *sqlx.Tx) error
	}{{
		name: "Enqueue", id: "e-1",
		first: func(tx *sqlx.Tx) error {
			_, err := b.store.Outbox.Enqueue(b.interrupt(), tx, keyed("e-1", "order-e"))
			return err
		},
		retry: func(tx *sqlx.Tx) error {
			e, err := b.store.Outbox.Enqueue(b.ctx, tx, keyed("e-1", "order-e"))
			if err == nil && !e.Existed {
				t.Errorf("Enqueue retried in its transaction = %+v, want the delivery it wrote, Existed", e)
			}
			return err
		},
	}, {
		name: "EnqueueMany", id: "m-1",
		first: func(tx *sqlx.Tx) error {
			_, err := b.store.Outbox.EnqueueMany(b.ctx, tx, []store.EnqueueParams{keyed("m-1", "order-m1"), collides})
			if !errors.Is(err, courier.CodeIdempotencyCollision) {
				t.Fatalf("EnqueueMany with a collision = %v, want idempotency_collision", err)
			}
			return err
		},
		retry: func(tx *sqlx.Tx) error {
			_, err := b.store.Outbox.EnqueueMany(b.ctx, tx, []store.EnqueueParams{keyed("m-1", "order-m1"), other})
			return err
		},
	}, {
		name: "Publish", id: fmt.Sprintf("p-1:%d", sub.ID),
		first: func(tx *sqlx.Tx) error {
			_, err := b.store.Outbox.Publish(b.interrupt(), tx, store.PublishParams{
				Tenant: "t", EventType: "order.updated", EventID: "p-1", Payload: []byte(`{"id":"p-1"}`), OrderingKey: "order-p",
			})
			return err
		},
		retry: func(tx *sqlx.Tx) error {
			_, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{
				Tenant: "t", EventType: "order.updated", EventID: "p-1", Payload: []byte(`{"id":"p-1"}`), OrderingKey: "order-p",
			})
			return err
		},
	}} {
		tx := b.begin(t)
		if err := c.first(tx); err == nil {
			t.Fatalf("%s: the interrupted write succeeded", c.name)
		}
		if err := c.retry(tx); err != nil {
			t.Fatalf("%s retried in its transaction: %v", c.name, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Contains(got, c.id) {
			t.Errorf("%s: claimed %v; want %s, its key's head, among them", c.name, got, c.id)
		}
	}
	if h := check(t, b.bundle, 0); len(h.Invalid) != 0 {
		t.Fatalf("Check = %s/%s invalid %v; want none invalid", h.Status, h.Code, h.Invalid)
	}
}

// testCheckFindsADeliveryItsOrderingKeyNeverPromotes: a delivery waiting
// for its ordering key that no key's row will promote (its enqueue failed
// between its insert and its join, and the application committed anyway)
// is invalid to Check; one waiting behind its key's head is not. Enqueued
// again, it joins its key and is sent.
func testCheckFindsADeliveryItsOrderingKeyNeverPromotes(t *testing.T, open OpenFunc) {
	b := setupInterrupting(t, open)
	b.enqueue(t, keyed("head", "order-1"))
	b.enqueue(t, keyed("behind", "order-1"))
	if h := check(t, b.bundle, 0); h.Status != store.HealthOK || len(h.Invalid) != 0 {
		t.Fatalf("Check of a key's head and the delivery behind it = %s/%s invalid %v, want ok", h.Status, h.Code, h.Invalid)
	}

	p := keyed("stranded", "order-2")
	tx := b.begin(t)
	if _, err := b.store.Outbox.Enqueue(b.interrupt(), tx, p); err == nil {
		t.Fatal("the interrupted Enqueue succeeded")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	d, err := b.store.Outbox.Lookup(b.ctx, p.NotificationID, p.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	h := check(t, b.bundle, 0)
	if h.Status != store.HealthBlocked || h.Code != courier.CodeIntegrity || !slices.Equal(h.Invalid, []int64{d.ID}) {
		t.Fatalf("Check = %s/%s invalid %v; want blocked integrity_mismatch, invalid [%d] (held %q)", h.Status, h.Code, h.Invalid, d.ID, d.Held)
	}

	if e := b.enqueue(t, p); !e.Existed || e.ID != d.ID {
		t.Fatalf("Enqueue again = %+v, want delivery %d, Existed", e, d.ID)
	}
	got := ids(b.claim(t, "w", 10, time.Minute))
	slices.Sort(got)
	if !slices.Equal(got, []string{"head", "stranded"}) {
		t.Fatalf("claimed %v, want head and stranded, each its key's head", got)
	}
	if h := check(t, b.bundle, 0); len(h.Invalid) != 0 {
		t.Fatalf("Check after the delivery joined its key = %s/%s invalid %v, want none invalid", h.Status, h.Code, h.Invalid)
	}
}

// testEnqueueThroughAConnectionInATransactionIsRefused: a connection
// (*sql.Conn, *sqlx.Conn) the application began a transaction on, with
// its BeginTx or a BEGIN of its own, is refused with invalid_argument: a
// transaction of courier's own would nest in the application's (PostgreSQL
// only warns, and courier's COMMIT would commit the application's writes,
// which its rollback would then not undo). Nothing is written, the
// application's rollback undoes its own writes, and once the transaction
// ends the connection writes in a transaction of courier's own again.
func testEnqueueThroughAConnectionInATransactionIsRefused(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for i, c := range []struct {
		name string
		conn func() (store.DBTX, *sql.Conn)
	}{
		{"*sql.Conn", func() (store.DBTX, *sql.Conn) {
			c, err := b.db.Conn(b.ctx)
			if err != nil {
				t.Fatal(err)
			}
			return c, c
		}},
		{"*sqlx.Conn", func() (store.DBTX, *sql.Conn) {
			c, err := b.db.Connx(b.ctx)
			if err != nil {
				t.Fatal(err)
			}
			return c, c.Conn
		}},
	} {
		for _, begin := range []string{"BeginTx", "BEGIN"} {
			name := c.name + " after " + begin
			conn, raw := c.conn()
			mine := delivery(fmt.Sprintf("app-%d-%s", i, begin))
			theirs := delivery(fmt.Sprintf("courier-%d-%s", i, begin))
			var rollback func() error
			if begin == "BeginTx" {
				tx, err := raw.BeginTx(b.ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := b.store.Outbox.Enqueue(b.ctx, tx, mine); err != nil {
					t.Fatalf("%s: the application's Enqueue in its transaction: %v", name, err)
				}
				rollback = tx.Rollback
			} else {
				if _, err := raw.ExecContext(b.ctx, "BEGIN"); err != nil {
					t.Fatal(err)
				}
				rollback = func() error { _, err := raw.ExecContext(b.ctx, "ROLLBACK"); return err }
			}
			if _, err := b.store.Outbox.Enqueue(b.ctx, conn, theirs); courier.CodeOf(err) != courier.CodeInvalidArgument {
				t.Errorf("%s: Enqueue through the connection = %v, want invalid_argument", name, err)
			}
			if _, err := b.store.Outbox.EnqueueMany(b.ctx, conn, []store.EnqueueParams{theirs}); courier.CodeOf(err) != courier.CodeInvalidArgument {
				t.Errorf("%s: EnqueueMany through the connection = %v, want invalid_argument", name, err)
			}
			if err := rollback(); err != nil {
				t.Fatalf("%s: the application's rollback: %v", name, err)
			}
			for _, p := range []store.EnqueueParams{mine, theirs} {
				if _, err := b.store.Outbox.Lookup(b.ctx, p.NotificationID, p.Endpoint); !errors.Is(err, courier.CodeNotFound) {
					t.Errorf("%s: after the application's rollback, Lookup(%s) = %v; want nothing written", name, p.NotificationID, err)
				}
			}
			if e, err := b.store.Outbox.Enqueue(b.ctx, conn, theirs); err != nil || e.Existed {
				t.Fatalf("%s: Enqueue through the connection once its transaction ended = %+v, %v; want a new delivery", name, e, err)
			}
			if err := raw.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
