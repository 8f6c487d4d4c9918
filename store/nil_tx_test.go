package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// openStore opens a SQLite store of its own for one test.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "courier.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSubscriptionsWithoutATransaction: Subscriptions.Create with no
// transaction (nil), as its documentation allows, panicked. A nil tx now
// means the Store's own connection, for Create, Update and Get alike.
func TestSubscriptionsWithoutATransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t)
	p := store.SubscriptionParams{Tenant: "acme", Endpoint: "https://shipping.example/hooks", EventTypes: []string{"order.paid"},
		KeyID: "k1"}
	created, err := s.Subscriptions.Create(ctx, nil, p)
	if err != nil {
		t.Fatalf("Create without a transaction: %v", err)
	}
	p.EventTypes = []string{"order.paid", "order.shipped"}
	updated, err := s.Subscriptions.Update(ctx, nil, created.ID, p)
	if err != nil {
		t.Fatalf("Update without a transaction: %v", err)
	}
	got, err := s.Subscriptions.Get(ctx, nil, created.ID)
	if err != nil {
		t.Fatalf("Get without a transaction: %v", err)
	}
	if got.ID != created.ID || strings.Join(got.EventTypes, " ") != "order.paid order.shipped" || !got.UpdatedAt.Equal(updated.UpdatedAt) {
		t.Fatalf("Get = %+v, want the update %+v", got, updated)
	}
	if list, err := s.Subscriptions.List(ctx, "acme"); err != nil || len(list) != 1 || list[0].ID != created.ID {
		t.Fatalf("List = %+v, %v: want the subscription committed", list, err)
	}
	if _, err := s.Subscriptions.Get(ctx, nil, created.ID+1); courier.CodeOf(err) != courier.CodeNotFound {
		t.Fatalf("Get of no subscription without a transaction: %v, want not_found", err)
	}
}

// TestMethodsOnTheCallersTransactionRefuseNone: a method that writes in
// the caller's transaction, given none (nil, or a nil *sql.Tx or *sqlx.Tx
// as a DBTX), panicked. It is now invalid_argument, and nothing is written.
func TestMethodsOnTheCallersTransactionRefuseNone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t)
	sub := store.SubscriptionParams{Tenant: "acme", Endpoint: "https://shipping.example/hooks", EventTypes: []string{"*"},
		KeyID: "k1"}
	if _, err := s.Subscriptions.Create(ctx, s.DB(), sub); err != nil {
		t.Fatal(err)
	}
	c, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: "r1", SourceMaxAttempts: 5,
		CapabilitiesSHA256: strings.Repeat("a", 64), Body: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	command, err := c.Payload()
	if err != nil {
		t.Fatal(err)
	}
	delivery := store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/h", Payload: []byte(`{}`)}
	methods := map[string]func(tx store.DBTX) error{
		"Outbox.Enqueue": func(tx store.DBTX) error {
			_, err := s.Outbox.Enqueue(ctx, tx, delivery)
			return err
		},
		"Outbox.EnqueueMany": func(tx store.DBTX) error {
			_, err := s.Outbox.EnqueueMany(ctx, tx, []store.EnqueueParams{delivery})
			return err
		},
		"Outbox.EnqueueCommand": func(tx store.DBTX) error {
			_, err := s.Outbox.EnqueueCommand(ctx, tx, store.CommandParams{Endpoint: "https://source.example/h", Payload: command})
			return err
		},
		"Outbox.Publish": func(tx store.DBTX) error {
			_, err := s.Outbox.Publish(ctx, tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "e-1", Payload: []byte(`{}`)})
			return err
		},
	}
	none := map[string]store.DBTX{"nil": nil, "nil *sql.Tx": (*sql.Tx)(nil), "nil *sqlx.Tx": (*sqlx.Tx)(nil)}
	for name, call := range methods {
		for noneName, tx := range none {
			t.Run(name+"/"+noneName, func(t *testing.T) {
				var err error
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("panicked: %v", r)
						}
					}()
					err = call(tx)
				}()
				if courier.CodeOf(err) != courier.CodeInvalidArgument {
					t.Fatalf("%v, want invalid_argument", err)
				}
			})
		}
	}
	h, err := s.Outbox.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.Counts[courier.StatusPending]; n != 0 {
		t.Fatalf("%d deliveries written, want none", n)
	}
}

// TestMigrateTxRefusesNone: the engines' MigrateTx given a nil *sql.Tx
// panicked; it is now invalid_argument.
func TestMigrateTxRefusesNone(t *testing.T) {
	t.Parallel()
	if err := sqlite.MigrateTx(t.Context(), nil); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("sqlite.MigrateTx(nil) = %v, want invalid_argument", err)
	}
}

// nilTracer is a courier.Tracer whose methods need their receiver.
type nilTracer struct{ name string }

func (t *nilTracer) Start(ctx context.Context, name string, _ courier.SpanKind, _ ...slog.Attr) (context.Context, courier.Span) {
	panic("Start on " + t.name)
}
func (t *nilTracer) Inject(context.Context) courier.TraceContext { panic("Inject on " + t.name) }
func (t *nilTracer) Extract(ctx context.Context, _ courier.TraceContext) context.Context {
	panic("Extract on " + t.name)
}

// TestANilPointerTracerTracesNothing: a Config.Tracer that is a nil
// pointer (declared, and set only when tracing is on) is no Tracer, as a
// nil one: an enqueue traces nothing and keeps no trace context. It was
// called, and the application's enqueue panicked in its transaction.
func TestANilPointerTracerTracesNothing(t *testing.T) {
	t.Parallel()
	var tracer *nilTracer
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "courier.db"), store.Config{Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/hooks", Payload: []byte(`{}`)}); err != nil {
		t.Fatalf("Enqueue with a nil pointer Tracer: %v", err)
	}
	var parent sql.NullString
	if err := s.DB().Get(&parent, "SELECT trace_parent FROM courier_outbox"); err != nil || parent.Valid {
		t.Fatalf("trace_parent = %v, %v; want none kept", parent, err)
	}
}
