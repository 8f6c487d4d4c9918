package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// atSettle is a Store's tracer that calls do, once, as the worker begins
// its first settle: the attempt was made and answered, and its outcome is
// about to be written.
type atSettle struct {
	do   func()
	once sync.Once
}

func (a *atSettle) Start(ctx context.Context, name string, _ courier.SpanKind, _ ...slog.Attr) (context.Context, courier.Span) {
	if name == "courier.settle" {
		a.once.Do(a.do)
	}
	return ctx, nopSpan{}
}
func (*atSettle) Inject(context.Context) courier.TraceContext { return courier.TraceContext{} }
func (*atSettle) Extract(ctx context.Context, _ courier.TraceContext) context.Context {
	return ctx
}

// TestAStoreClosedAsAnAttemptSettlesLosesNothing: the Store is closed
// while a Run settles an attempt the receiver acknowledged. The Run
// returns the closed Store's error, its Hook hears the attempt as
// unrecorded, and nothing is lost or sent twice: over the database opened
// again, the delivery is still leased, so no claim takes it while its
// lease lasts, and once the lease has expired a claim takes it again and
// it is delivered, its first attempt logged as one whose lease expired.
func TestAStoreClosedAsAnAttemptSettlesLosesNothing(t *testing.T) {
	t.Parallel()
	engines := map[string]func(t *testing.T, cfg store.Config) (first, again func() *store.Store){
		"sqlite": func(t *testing.T, cfg store.Config) (func() *store.Store, func() *store.Store) {
			path := filepath.Join(t.TempDir(), "outbox.db")
			open := func(cfg store.Config) *store.Store {
				s, err := sqlite.Open(t.Context(), path, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			again := cfg
			again.Tracer = nil
			return func() *store.Store { return open(cfg) }, func() *store.Store { return open(again) }
		},
		"postgres": func(t *testing.T, cfg store.Config) (func() *store.Store, func() *store.Store) {
			db, err := sqlx.Open(postgres.DriverName, pgtest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := store.Migrate(t.Context(), db); err != nil {
				t.Fatal(err)
			}
			open := func(cfg store.Config) *store.Store {
				s, err := store.Open(t.Context(), db, cfg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			again := cfg
			again.Tracer = nil
			return func() *store.Store { return open(cfg) }, func() *store.Store { return open(again) }
		},
	}
	for name, engine := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var arrivals atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrivals.Add(1)
				body, _ := io.ReadAll(r.Body)
				w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
			}))
			t.Cleanup(srv.Close)
			clock := fakeclock.New()
			var closing atomic.Pointer[store.Store]
			tracer := &atSettle{do: func() { closing.Load().Close() }} // closes the Store as the worker settles
			first, again := engine(t, store.Config{Now: clock.Now, Tracer: tracer})
			s := first()
			closing.Store(s)
			e, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{NotificationID: "n-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			events := make(chan client.Event, 10)
			cfg := client.Config{Store: s, Signer: newSigner(t), Transport: loopbackGuard(t, srv.URL).Transport(),
				Lease: time.Minute, Hook: func(e client.Event) { events <- e }}
			w, err := client.NewWorker(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
			defer cancel()
			if err := w.Run(ctx); !errors.Is(err, courier.CodeDatabaseUnavailable) {
				t.Fatalf("Run = %v, want the closed Store's database_unavailable", err)
			}
			if ev := <-events; !ev.Unrecorded || ev.DeliveryID != e.ID || ev.Status != "" {
				t.Fatalf("event %+v, want delivery %d's attempt unrecorded", ev, e.ID)
			}

			s = again()
			cfg.Store, cfg.Hook = s, nil
			w2, err := client.NewWorker(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := w2.Work(ctx); n != 0 || err != nil {
				t.Fatalf("Work while the lease lasts = %d, %v; want nothing claimed", n, err)
			}
			d, err := s.Outbox.Get(t.Context(), e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != courier.StatusLeased || d.Attempts != 1 {
				t.Fatalf("reopened: %s after %d attempts, want leased after 1", d.Status, d.Attempts)
			}
			clock.Advance(2 * time.Minute)
			if n, err := w2.Work(ctx); n != 1 || err != nil {
				t.Fatalf("Work once the lease expired = %d, %v; want the delivery claimed again", n, err)
			}
			if d, _ = s.Outbox.Get(t.Context(), e.ID); d.Status != courier.StatusSucceeded || d.Attempts != 2 || arrivals.Load() != 2 {
				t.Fatalf("after the lease expired: %s after %d attempts, %d requests; want succeeded after 2, 2 requests", d.Status, d.Attempts, arrivals.Load())
			}
			attempts, err := s.Outbox.Attempts(t.Context(), e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(attempts) != 2 || attempts[0].ErrorCode != courier.CodeLeaseExpired || attempts[1].Outcome != store.AttemptSucceeded {
				t.Fatalf("attempts log %+v, want the first lease_expired, the second succeeded", attempts)
			}
		})
	}
}
