package storetest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// statements records the statements pgx sends, but the Store's readings
// of the server's clock, which it takes when it likes.
type statements struct {
	mu   sync.Mutex
	sent []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !strings.Contains(data.SQL, "clock_timestamp()") {
		s.mu.Lock()
		s.sent = append(s.sent, data.SQL)
		s.mu.Unlock()
	}
	return ctx
}

func (*statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements sent since the last take.
func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sent := s.sent
	s.sent = nil
	return sent
}

// TestAHealthySettleIsOneStatementOnPostgres: on PostgreSQL, the
// outcomes of a healthy endpoint's deliveries (no breaker row, no
// ordering key, an outcome that says nothing against the endpoint) are
// settled and logged by one statement, not a transaction of five round
// trips: a success, an answered retry and a retry past its budget alike,
// each row and attempt as the transaction writes them. Those that move a
// breaker or an ordering key, and an outcome whose lease is lost, are
// settled by the transaction, which reports the lost lease as before.
func TestAHealthySettleIsOneStatementOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := pgx.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	trace := &statements{}
	cfg.Tracer = trace
	db := sqlx.NewDb(stdlib.OpenDB(*cfg), postgres.DriverName)
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	const healthy, failing = "https://healthy.example/hook", "https://failing.example/hook"
	at := func(ep, id string, p store.EnqueueParams) int64 {
		p.NotificationID, p.Endpoint, p.Payload = id, ep, []byte(`{"id":"`+id+`"}`)
		return enqueue(t, s, p)
	}
	ok := at(healthy, "ok", store.EnqueueParams{})
	answered := at(healthy, "answered", store.EnqueueParams{})
	spent := at(healthy, "spent", store.EnqueueParams{MaxAttempts: 1})
	keyed := at(healthy, "keyed", store.EnqueueParams{OrderingKey: "k"})
	down := at(failing, "down", store.EnqueueParams{})
	leases := make(map[int64]protocol.Lease)
	for _, c := range claimAll(t, s, 5) {
		leases[c.DeliveryID] = c.Lease
	}
	outcome := map[int64]protocol.Outcome{
		ok:       {Result: protocol.Succeeded, HTTPStatus: 200},
		answered: {Result: protocol.Retry, Code: courier.CodeReceiverRejected, HTTPStatus: 409, RemoteCode: "busy_elsewhere", RetryDelay: time.Minute},
		spent:    {Result: protocol.Retry, Code: courier.CodeReceiverRejected, HTTPStatus: 409, RetryDelay: time.Minute},
		keyed:    {Result: protocol.Succeeded, HTTPStatus: 200},
		down:     {Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Minute},
	}
	settle := func(ids ...int64) []protocol.Settled {
		t.Helper()
		var batch []protocol.Outcome
		for _, id := range ids {
			oc := outcome[id]
			oc.Lease, oc.Duration = leases[id], 5*time.Millisecond
			batch = append(batch, oc)
		}
		trace.take()
		settled, err := protocol.For(s).Settle(ctx, batch...)
		if err != nil {
			t.Fatalf("settle: %v", err)
		}
		return settled
	}
	want := func(settled []protocol.Settled, ids []int64, statuses ...courier.Status) {
		t.Helper()
		for i, st := range settled {
			if st.Err != nil || st.Status != statuses[i] {
				t.Errorf("delivery %d settled %+v, want %s", ids[i], st, statuses[i])
			}
		}
	}

	plain := []int64{ok, answered, spent}
	want(settle(plain...), plain, courier.StatusSucceeded, courier.StatusRetryWait, courier.StatusFailed)
	if sent := trace.take(); len(sent) != 1 {
		t.Errorf("a healthy endpoint's settle sent %d statements, want 1:\n%s", len(sent), strings.Join(sent, "\n---\n"))
	}

	rest := []int64{keyed, down}
	want(settle(rest...), rest, courier.StatusSucceeded, courier.StatusRetryWait)
	sent := trace.take()
	if len(sent) < 3 || !strings.EqualFold(strings.TrimSpace(sent[len(sent)-1]), "commit") {
		t.Errorf("a settle that moves a key and a breaker sent %q, want its transaction", sent)
	}
	// The keyed outcome is known keyed from its lease: no statement of
	// its own that would settle nothing before the transaction.
	for _, q := range sent {
		if strings.Contains(q, "held AS MATERIALIZED") {
			t.Errorf("a keyed delivery's settle sent outbox_settle_plain, which settles no keyed row, before its transaction")
		}
	}
	if h, err := s.Endpoints.Get(ctx, failing); err != nil || h.ConsecutiveFailures != 1 {
		t.Errorf("the failing endpoint's breaker: %+v, %v; want one failure counted", h, err)
	}

	again, err := protocol.For(s).Settle(ctx, protocol.Outcome{Lease: leases[ok], Result: protocol.Succeeded})
	if err != nil || courier.CodeOf(again[0].Err) != courier.CodeLeaseLost {
		t.Errorf("a settled delivery settled again: %v, %+v; want %s", err, again, courier.CodeLeaseLost)
	}

	// Each attempt is logged as the transaction logs it.
	wantAttempt := map[int64]store.Attempt{
		ok:       {Outcome: store.AttemptSucceeded, HTTPStatus: 200},
		answered: {Outcome: store.AttemptRetry, HTTPStatus: 409, ErrorCode: courier.CodeReceiverRejected, RemoteCode: "busy_elsewhere"},
		spent:    {Outcome: store.AttemptFailed, HTTPStatus: 409, ErrorCode: courier.CodeReceiverRejected},
		keyed:    {Outcome: store.AttemptSucceeded, HTTPStatus: 200},
		down:     {Outcome: store.AttemptRetry, HTTPStatus: 503, ErrorCode: courier.CodeReceiverUnavailable},
	}
	for id, w := range wantAttempt {
		got, err := s.Outbox.Attempts(ctx, id)
		if err != nil || len(got) != 1 {
			t.Fatalf("delivery %d: attempts %+v, %v; want one", id, got, err)
		}
		a, l := got[0], leases[id]
		if a.Outcome != w.Outcome || a.HTTPStatus != w.HTTPStatus || a.ErrorCode != w.ErrorCode || a.RemoteCode != w.RemoteCode ||
			a.Attempt != 1 || a.Owner != l.Owner || !a.LeasedAt.Equal(l.LeasedAt) || !a.LeaseExpiresAt.Equal(l.ExpiresAt) ||
			a.Duration != 5*time.Millisecond || a.FinishedAt.IsZero() {
			t.Errorf("delivery %d: attempt %+v, want %+v of its lease %+v", id, a, w, l)
		}
	}
	if d := get(t, s, answered); d.LastRemoteCode != "busy_elsewhere" || d.LastHTTPStatus != 409 || d.Attempts != 1 {
		t.Errorf("the answered retry's row: %+v", d)
	}
}

func get(t *testing.T, s *store.Store, id int64) store.Delivery {
	t.Helper()
	d, err := s.Outbox.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
