package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// appTx is a migrated database with a Store on it, for tests of what an
// application does in the transactions it enqueues in.
type appTx struct {
	url string
	db  *sqlx.DB
	s   *store.Store
}

func setupAppTx(t *testing.T) appTx {
	t.Helper()
	ctx := t.Context()
	u := pgtest.URL(t)
	db := openURL(t, u)
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return appTx{url: u, db: db, s: s}
}

func (a appTx) rows(t *testing.T, id string) int {
	t.Helper()
	var n int
	if err := a.db.GetContext(t.Context(), &n, "SELECT count(*) FROM courier_outbox WHERE notification_id = $1", id); err != nil {
		t.Fatal(err)
	}
	return n
}

func delivery(id string) store.EnqueueParams {
	return store.EnqueueParams{NotificationID: id, Endpoint: "https://receiver.example/hook", Payload: []byte(`{"id":"` + id + `"}`)}
}

// isRetryTheTransaction asserts what the package doc (Errors in the
// application's transaction) promises of a conflict PostgreSQL ended:
// database_unavailable, which is neither invalid input nor a collision.
func isRetryTheTransaction(t *testing.T, what string, err error) {
	t.Helper()
	if courier.CodeOf(err) != courier.CodeDatabaseUnavailable || !errors.Is(err, courier.CodeDatabaseUnavailable) ||
		errors.Is(err, courier.CodeInvalidArgument) || errors.Is(err, courier.CodeIdempotencyCollision) || errors.Is(err, courier.CodePayloadInvalid) {
		t.Fatalf("%s: %v (code %q); want database_unavailable alone: roll back, retry the transaction", what, err, courier.CodeOf(err))
	}
}

// TestConcurrentEnqueuesUnderRepeatableReadAndSerializable: two
// application transactions at REPEATABLE READ or SERIALIZABLE enqueue
// (or publish) the same delivery; the second, whose snapshot predates the
// first's commit, is ended by PostgreSQL (40001). It gets
// database_unavailable, not invalid_argument or a collision, and the
// transaction retried whole finds the delivery Existed: one row, one
// delivery.
func TestConcurrentEnqueuesUnderRepeatableReadAndSerializable(t *testing.T) {
	t.Parallel()
	a := setupAppTx(t)
	ctx := t.Context()
	if _, err := a.s.Subscriptions.Create(ctx, a.db, store.SubscriptionParams{Tenant: "t", Endpoint: "https://receiver.example/sub", EventTypes: []string{"*"}, KeyID: "k"}); err != nil {
		t.Fatal(err)
	}
	type write func(tx *sqlx.Tx, id string) (existed bool, err error)
	enqueue := func(tx *sqlx.Tx, id string) (bool, error) {
		e, err := a.s.Outbox.Enqueue(ctx, tx, delivery(id))
		return e.Existed, err
	}
	enqueueKeyed := func(tx *sqlx.Tx, id string) (bool, error) {
		p := delivery(id)
		p.OrderingKey = "k-" + id
		e, err := a.s.Outbox.Enqueue(ctx, tx, p)
		return e.Existed, err
	}
	publish := func(tx *sqlx.Tx, id string) (bool, error) {
		ps, err := a.s.Outbox.Publish(ctx, tx, store.PublishParams{Tenant: "t", EventType: "e", EventID: id, Payload: []byte(`{}`)})
		if err != nil {
			return false, err
		}
		if len(ps) != 1 {
			t.Fatalf("published to %d subscriptions", len(ps))
		}
		return ps[0].Existed, nil
	}
	for _, level := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelSerializable} {
		for name, w := range map[string]write{"enqueue": enqueue, "keyed": enqueueKeyed, "publish": publish} {
			id := strings.ReplaceAll(level.String(), " ", "-") + "." + name
			opts := &sql.TxOptions{Isolation: level}
			first, err := a.db.BeginTxx(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			second, err := a.db.BeginTxx(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			// The second's snapshot is taken now, before the first commits.
			if _, err := second.ExecContext(ctx, "SELECT count(*) FROM courier_outbox"); err != nil {
				t.Fatal(err)
			}
			if _, err := w(first, id); err != nil {
				t.Fatalf("%s: first: %v", id, err)
			}
			if err := first.Commit(); err != nil {
				t.Fatal(err)
			}
			_, err = w(second, id)
			isRetryTheTransaction(t, id+": second", err)
			if err := second.Rollback(); err != nil {
				t.Fatal(err)
			}
			retry, err := a.db.BeginTxx(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			existed, err := w(retry, id)
			if err != nil || !existed {
				t.Fatalf("%s: the retried transaction: existed %v, %v; want the delivery found", id, existed, err)
			}
			if err := retry.Commit(); err != nil {
				t.Fatal(err)
			}
			if id := id; name == "publish" {
				var n int
				if err := a.db.GetContext(ctx, &n, "SELECT count(*) FROM courier_outbox WHERE notification_id LIKE $1 || ':%'", id); err != nil || n != 1 {
					t.Fatalf("%s: %d deliveries, %v; want 1", id, n, err)
				}
			} else if n := a.rows(t, id); n != 1 {
				t.Fatalf("%s: %d deliveries; want 1", id, n)
			}
		}
	}
}

// TestADeadlockBetweenApplicationTransactionsIsDatabaseUnavailable: two
// application transactions each enqueue a delivery, then the other's;
// each waits for the other's uncommitted row, and PostgreSQL aborts one
// (40P01): database_unavailable, while the other goes on and commits.
func TestADeadlockBetweenApplicationTransactionsIsDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	a := setupAppTx(t)
	ctx := t.Context()
	t1, err := a.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Rollback()
	t2, err := a.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Rollback()
	if _, err := a.s.Outbox.Enqueue(ctx, t1, delivery("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.s.Outbox.Enqueue(ctx, t2, delivery("y")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.s.Outbox.Enqueue(ctx, t1, delivery("y"))
		done <- err
	}()
	waitForLockWait(t, ctx, a.db, "courier_outbox")
	_, err2 := a.s.Outbox.Enqueue(ctx, t2, delivery("x"))
	if err2 == nil {
		if err := t2.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	err1 := <-done
	switch {
	case err1 == nil && err2 != nil:
		isRetryTheTransaction(t, "the second transaction", err2)
	case err2 == nil && err1 != nil:
		isRetryTheTransaction(t, "the first transaction", err1)
	default:
		t.Fatalf("first: %v; second: %v; want one ended by the deadlock", err1, err2)
	}
}

// TestEnqueueInAnAbortedTransactionSaysSo: the application's transaction
// already failed (a statement of its own refused; PostgreSQL ignores
// every statement until it rolls back, 25P02) when it enqueues. The
// enqueue fails database_unavailable, as any failure that ends the
// caller's transaction does (a receiver's answer stays a 503, never a
// 4xx that would make its sender give the notification up), saying that
// the transaction was aborted before and must be rolled back, rather
// than that the database failed; nothing is written.
func TestEnqueueInAnAbortedTransactionSaysSo(t *testing.T) {
	t.Parallel()
	a := setupAppTx(t)
	ctx := t.Context()
	check := func(t *testing.T, err error) {
		t.Helper()
		isRetryTheTransaction(t, "enqueue", err)
		if msg := err.Error(); !strings.Contains(msg, "transaction is aborted") || strings.Contains(msg, "database failed") {
			t.Fatalf("enqueue in an aborted transaction: %v; want it said so", err)
		}
	}
	t.Run("database/sql", func(t *testing.T) {
		tx, err := a.db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "SELECT 1/0"); err == nil {
			t.Fatal("1/0 succeeded")
		}
		_, err = a.s.Outbox.Enqueue(ctx, tx, delivery("aborted-sql"))
		check(t, err)
	})
	t.Run("pgx", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, a.url)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "SELECT 1/0"); err == nil {
			t.Fatal("1/0 succeeded")
		}
		_, err = postgres.Enqueue(ctx, a.s, tx, delivery("aborted-pgx"))
		check(t, err)
	})
	if n := a.rows(t, "aborted-sql") + a.rows(t, "aborted-pgx"); n != 0 {
		t.Fatalf("%d deliveries written", n)
	}
}

// TestEnqueueInAReadOnlyTransactionFailsNamingIt: an enqueue in a
// transaction begun read-only, or made so by SET TRANSACTION, fails at
// once, database_unavailable, naming the read-only transaction, and
// writes nothing.
func TestEnqueueInAReadOnlyTransactionFailsNamingIt(t *testing.T) {
	t.Parallel()
	a := setupAppTx(t)
	ctx := t.Context()
	for _, begin := range []func() (*sqlx.Tx, error){
		func() (*sqlx.Tx, error) { return a.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true}) },
		func() (*sqlx.Tx, error) {
			tx, err := a.db.BeginTxx(ctx, nil)
			if err == nil {
				_, err = tx.ExecContext(ctx, "SET TRANSACTION READ ONLY")
			}
			return tx, err
		},
	} {
		tx, err := begin()
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.s.Outbox.Enqueue(ctx, tx, delivery("ro"))
		tx.Rollback()
		isRetryTheTransaction(t, "enqueue", err)
		if !strings.Contains(err.Error(), "read-only transaction") {
			t.Fatalf("enqueue in a read-only transaction: %v; want it named", err)
		}
	}
	if n := a.rows(t, "ro"); n != 0 {
		t.Fatalf("%d deliveries written", n)
	}
}

// TestSavepointsKeepExactlyTheEnqueuesThatSurvive: an application rolls
// back to savepoints taken before an enqueue (it is gone, with its
// ordering key's turn and its wake-up) and after one (it stays), through
// database/sql and through pgx's nested transactions, and commits. The
// outbox holds exactly the deliveries that survived, a key whose only
// enqueue was rolled back is headed by the next one, which is claimed, and
// a transaction whose every enqueue was rolled back wakes no worker.
func TestSavepointsKeepExactlyTheEnqueuesThatSurvive(t *testing.T) {
	t.Parallel()
	a := setupAppTx(t)
	ctx := t.Context()
	listener, err := pgx.Connect(ctx, a.url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN courier_outbox"); err != nil {
		t.Fatal(err)
	}
	// nextWakeUp returns the payload of the next notification on the
	// workers' channel: "" is an enqueue's, a marker the test's own,
	// sent after the transaction: notifications arrive in commit order.
	nextWakeUp := func() string {
		t.Helper()
		n, err := listener.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n.Payload
	}
	mark := func(m string) {
		t.Helper()
		if _, err := a.db.ExecContext(ctx, "SELECT pg_notify('courier_outbox', $1)", m); err != nil {
			t.Fatal(err)
		}
	}
	keyed := func(id string) store.EnqueueParams {
		p := delivery(id)
		p.OrderingKey = "order-1"
		return p
	}
	exec := func(tx *sqlx.Tx, q string) {
		t.Helper()
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	enqueue := func(tx *sqlx.Tx, p store.EnqueueParams) {
		t.Helper()
		if _, err := a.s.Outbox.Enqueue(ctx, tx, p); err != nil {
			t.Fatal(err)
		}
	}

	// Every enqueue of the transaction rolled back: no delivery, no wake-up.
	tx, err := a.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	exec(tx, "SAVEPOINT before")
	enqueue(tx, keyed("gone-1"))
	exec(tx, "ROLLBACK TO SAVEPOINT before")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	mark("after-1")
	if got := nextWakeUp(); got != "after-1" {
		t.Fatalf("a transaction whose only enqueue was rolled back woke the workers (%q)", got)
	}

	// Savepoints before and after enqueues, rolled back and released.
	tx, err = a.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	enqueue(tx, delivery("kept-1"))
	exec(tx, "SAVEPOINT after")
	enqueue(tx, delivery("kept-1")) // found, Existed
	enqueue(tx, delivery("gone-2"))
	exec(tx, "ROLLBACK TO SAVEPOINT after")
	exec(tx, "SAVEPOINT nested")
	enqueue(tx, keyed("kept-2"))
	exec(tx, "RELEASE SAVEPOINT nested")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	mark("after-2")
	if got := nextWakeUp(); got != "" {
		t.Fatalf("the transaction's enqueues woke no worker (%q first)", got)
	}
	if got := nextWakeUp(); got != "after-2" {
		t.Fatalf("a second wake-up (%q) for one transaction", got)
	}

	// pgx's nested transactions are savepoints too.
	pool, err := pgxpool.New(ctx, a.url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ptx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ptx.Rollback(ctx)
	nested, err := ptx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Enqueue(ctx, a.s, nested, delivery("gone-3")); err != nil {
		t.Fatal(err)
	}
	if err := nested.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Enqueue(ctx, a.s, ptx, delivery("kept-3")); err != nil {
		t.Fatal(err)
	}
	if err := ptx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	var ids []string
	if err := a.db.SelectContext(ctx, &ids, "SELECT notification_id FROM courier_outbox ORDER BY notification_id"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids, " "); got != "kept-1 kept-2 kept-3" {
		t.Fatalf("the outbox holds %s; want kept-1 kept-2 kept-3", got)
	}
	claimed, err := protocol.For(a.s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range claimed {
		got[c.NotificationID] = true
	}
	if len(claimed) != 3 || !got["kept-1"] || !got["kept-2"] || !got["kept-3"] {
		t.Fatalf("claimed %v; want kept-1, kept-2 (its key's head, the rolled-back one before it gone) and kept-3", got)
	}
}

// TestSettingsOfTheApplicationsTransaction: an application sets its
// transaction's statement_timeout, lock_timeout, search_path or role
// before it enqueues. Settings under which courier's statements can run
// leave the enqueue as it is; one under which they cannot fails the
// enqueue, naming what PostgreSQL refused, and writes nothing: a timeout
// that ends them with database_unavailable (a retry may pass), a
// search_path without courier's schema or a role without its privileges
// with config_invalid (no retry passes).
func TestSettingsOfTheApplicationsTransaction(t *testing.T) {
	t.Parallel()
	a := setupAppTx(t)
	ctx := t.Context()
	// Roles are the server's, shared by the tests' databases.
	writer, reader := "app_writer_"+strings.ToLower(rand.Text()[:10]), "app_reader_"+strings.ToLower(rand.Text()[:10])
	for _, q := range []string{
		"CREATE SCHEMA app",
		"CREATE TABLE app.orders (id text PRIMARY KEY)",
		"CREATE ROLE " + writer + " NOLOGIN",
		"GRANT USAGE ON SCHEMA app, public TO " + writer,
		"GRANT ALL ON ALL TABLES IN SCHEMA app, public TO " + writer,
		"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO " + writer,
		"CREATE ROLE " + reader + " NOLOGIN",
		"GRANT USAGE ON SCHEMA app, public TO " + reader,
		"GRANT SELECT ON ALL TABLES IN SCHEMA app, public TO " + reader,
	} {
		if _, err := a.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, role := range []string{writer, reader} {
			a.db.Exec("DROP OWNED BY " + role)
			a.db.Exec("DROP ROLE " + role)
		}
	})
	for _, c := range []struct {
		name, set string
		refused   string       // what the error names; "" for an enqueue that succeeds
		code      courier.Code // the refusal's code
	}{
		{"generous statement_timeout", "SET LOCAL statement_timeout = '30s'", "", ""},
		{"lock_timeout", "SET LOCAL lock_timeout = '5s'", "", ""},
		{"idle_in_transaction_session_timeout", "SET LOCAL idle_in_transaction_session_timeout = '30s'", "", ""},
		{"search_path with courier's schema after the application's", "SET LOCAL search_path = app, public", "", ""},
		{"role with privileges", "SET LOCAL ROLE " + writer, "", ""},
		{"search_path without courier's schema", "SET LOCAL search_path = app", `relation "courier_outbox" does not exist`, courier.CodeConfigInvalid},
		{"role without privileges", "SET LOCAL ROLE " + reader, "permission denied", courier.CodeConfigInvalid},
		{"statement_timeout that ends the enqueue", "SET LOCAL statement_timeout = '100ms'", "statement timeout", courier.CodeDatabaseUnavailable},
		{"lock_timeout that ends the enqueue", "SET LOCAL lock_timeout = '100ms'", "lock timeout", courier.CodeDatabaseUnavailable},
	} {
		id := strings.NewReplacer(" ", "-", "'", "").Replace(c.name)
		if strings.HasSuffix(c.name, "ends the enqueue") {
			// Another transaction is enqueueing the same delivery: the
			// enqueue waits for it, until its timeout ends it.
			holder, err := a.db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback()
			if _, err := a.s.Outbox.Enqueue(ctx, holder, delivery(id)); err != nil {
				t.Fatal(err)
			}
		}
		tx, err := a.db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO app.orders (id) VALUES ($1)", id); err != nil {
			t.Fatalf("%s: the application's insert: %v", c.name, err)
		}
		if _, err := tx.ExecContext(ctx, c.set); err != nil {
			t.Fatalf("%s: %v", c.set, err)
		}
		_, err = a.s.Outbox.Enqueue(ctx, tx, delivery(id))
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.refused != "" && (courier.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s: %v; want %s naming %s", c.name, err, c.code, c.refused)
		}
		if c.refused == "" {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		if n, want := a.rows(t, id), map[bool]int{true: 1, false: 0}[c.refused == ""]; n != want {
			t.Errorf("%s: %d deliveries; want %d", c.name, n, want)
		}
	}
}

// TestARefusedEnqueueLeavesTheTransactionAsItWas: an enqueue refused
// before any statement failed (invalid input, a collision with the
// delivery committed before) leaves the application's PostgreSQL
// transaction usable: its next enqueue and its commit go through.
func TestARefusedEnqueueLeavesTheTransactionAsItWas(t *testing.T) {
	t.Parallel()
	a := setupAppTx(t)
	ctx := t.Context()
	if _, err := a.s.Outbox.Enqueue(ctx, a.db, delivery("taken")); err != nil {
		t.Fatal(err)
	}
	tx, err := a.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	collision := delivery("taken")
	collision.Payload = []byte(`{"other":true}`)
	if _, err := a.s.Outbox.Enqueue(ctx, tx, collision); !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("enqueue of other content: %v; want a collision", err)
	}
	invalid := delivery("bad id!")
	if _, err := a.s.Outbox.Enqueue(ctx, tx, invalid); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("enqueue of an invalid id: %v; want invalid_argument", err)
	}
	if _, err := a.s.Outbox.Enqueue(ctx, tx, delivery("after")); err != nil {
		t.Fatalf("an enqueue after the refusals: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := a.rows(t, "after"); n != 1 {
		t.Fatalf("%d deliveries after the refusals; want 1", n)
	}
}

// TestAKeyJoinedUnderRepeatableReadIsRetriedWhole: two REPEATABLE READ
// transactions enqueue other deliveries of one ordering key; the second,
// whose snapshot predates the first's commit, is ended (40001,
// database_unavailable), and run again it takes its turn behind the
// first.
func TestAKeyJoinedUnderRepeatableReadIsRetriedWhole(t *testing.T) {
	t.Parallel()
	a := setupAppTx(t)
	ctx := t.Context()
	keyed := func(id string) store.EnqueueParams {
		p := delivery(id)
		p.OrderingKey = "order-1"
		return p
	}
	opts := &sql.TxOptions{Isolation: sql.LevelRepeatableRead}
	first, err := a.db.BeginTxx(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback()
	second, err := a.db.BeginTxx(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Rollback()
	if _, err := second.ExecContext(ctx, "SELECT count(*) FROM courier_outbox"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.s.Outbox.Enqueue(ctx, first, keyed("k1")); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	_, err = a.s.Outbox.Enqueue(ctx, second, keyed("k2"))
	isRetryTheTransaction(t, "the second transaction", err)
	if err := second.Rollback(); err != nil {
		t.Fatal(err)
	}
	retry, err := a.db.BeginTxx(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer retry.Rollback()
	if e, err := a.s.Outbox.Enqueue(ctx, retry, keyed("k2")); err != nil || e.Existed {
		t.Fatalf("the retried transaction: %+v, %v", e, err)
	}
	if err := retry.Commit(); err != nil {
		t.Fatal(err)
	}
	claimed, err := protocol.For(a.s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].NotificationID != "k1" {
		t.Fatalf("claimed %d deliveries; want k1 alone, k2 waiting behind it", len(claimed))
	}
}
