package postgres_test

import (
	"bytes"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/storetest"
	"github.com/courier-go/courier/store/postgres"
)

// sessionStateSQL reads what a connection keeps from one transaction to
// the next beyond its data: what a transaction-mode pooler (PgBouncer,
// RDS Proxy, Supavisor) would hand to another client, or lose when it
// gives this client another server connection. Read between two uses of
// a connection, outside any transaction.
const sessionStateSQL = `SELECT
	(SELECT count(*) FROM pg_listening_channels()) AS listening,
	(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS advisory_locks,
	(SELECT count(*) FROM pg_prepared_statements) AS prepared,
	(SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()) AS temp_tables,
	(SELECT count(*) FROM pg_cursors WHERE is_holdable) AS cursors,
	(SELECT COALESCE(string_agg(name, ',' ORDER BY name), '') FROM pg_settings WHERE source = 'session'
		AND name NOT IN ('transaction_isolation', 'transaction_read_only', 'transaction_deferrable')) AS settings`

// modeURL returns dbURL, a fresh database's, for connections that run
// pgx's default_query_exec_mode mode, as an application behind a
// transaction-mode pooler configures pgx. Their sessions' TimeZone is
// 5:45 ahead of UTC: text results (simple_protocol and exec read every
// column as text) are read in it.
func modeURL(t *testing.T, dbURL, mode string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("timezone", "Asia/Kathmandu")
	q.Set("default_query_exec_mode", mode)
	u.RawQuery = q.Encode()
	return u.String()
}

// openInMode opens a pool on modeURL.
func openInMode(t *testing.T, dbURL, mode string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open(postgres.DriverName, modeURL(t, dbURL, mode))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openPooled is openInMode, and fails t if a connection goes back to the
// pool holding session state (sessionStateSQL). The check costs a round
// trip each time a connection is taken from the pool.
func openPooled(t *testing.T, dbURL, mode string) *sqlx.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(modeURL(t, dbURL, mode))
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg, stdlib.OptionResetSession(func(ctx context.Context, c *pgx.Conn) error {
		var s struct {
			listening, advisoryLocks, prepared, tempTables, cursors int64
			settings                                                string
		}
		err := c.QueryRow(ctx, sessionStateSQL, pgx.QueryExecModeSimpleProtocol).Scan(&s.listening, &s.advisoryLocks, &s.prepared, &s.tempTables, &s.cursors, &s.settings)
		switch {
		case err != nil && ctx.Err() != nil:
			return driver.ErrBadConn // the caller gave up: its statement is not run, this connection not used
		case err != nil:
			t.Errorf("reading a pooled connection's session state: %v", err)
		case s.listening != 0 || s.advisoryLocks != 0 || s.prepared != 0 || s.tempTables != 0 || s.cursors != 0 || s.settings != "":
			t.Errorf("a connection went back to the pool with session state: %d channels listened to, %d advisory locks, %d prepared statements, %d temporary tables, %d cursors, settings %q",
				s.listening, s.advisoryLocks, s.prepared, s.tempTables, s.cursors, s.settings)
		}
		return nil
	}))
	t.Cleanup(func() { db.Close() })
	return sqlx.NewDb(db, postgres.DriverName)
}

// TestConformanceBehindATransactionPooler runs the conformance suite in
// the pgx query exec modes that need no prepared statement to outlive a
// transaction and differ most from the default: simple_protocol
// (parameters written into the statement by pgx, text results) and exec
// (unnamed statements, parameters typed from their Go types, text
// results). Under simple_protocol every connection going back to the pool
// must hold no session state: behind a transaction-mode pooler the next
// transaction may run on another server connection. (The modes do not
// change which statements the store runs: one check is enough.) Migrate
// runs in each mode in the suite's Schema test; the suite's other tests
// start from a copy of a migrated database (see migrated).
// describe_exec and cache_describe, which type parameters as the default
// mode does, are run by the tests of payloads and of a pgx.Tx below.
func TestConformanceBehindATransactionPooler(t *testing.T) {
	t.Parallel()
	t.Run("simple_protocol", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t,
			func(t *testing.T) *sqlx.DB { return openPooled(t, pgtest.URL(t), "simple_protocol") },
			func(t *testing.T) *sqlx.DB { return openPooled(t, migrated.URL(t), "simple_protocol") })
	})
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t,
			func(t *testing.T) *sqlx.DB { return openInMode(t, pgtest.URL(t), "exec") },
			func(t *testing.T) *sqlx.DB { return openInMode(t, migrated.URL(t), "exec") })
	})
}

// TestLargePayloadsInEachQueryExecMode: a payload of the largest size,
// holding quotes, backslashes and placeholders, which simple_protocol
// writes into the statement's text, is claimed byte for byte in every
// exec mode that keeps no prepared statement, and so is its ciphertext,
// sealed, which holds any byte.
func TestLargePayloadsInEachQueryExecMode(t *testing.T) {
	t.Parallel()
	// A JSON string of escapes and of ASCII and multibyte characters in
	// turn, up to the largest size; sealed, its bytes are any bytes.
	var b strings.Builder
	b.WriteString(`{"s":"`)
	parts := []string{`\u0000`, `'`, `\\`, `\"`, "é", "€", "😀", "$1", "a"}
	for i := 0; b.Len() < store.MaxPayloadSize-16; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	b.WriteString(`"}`)
	payload := []byte(b.String())
	key, err := store.NewPayloadKey("k1", bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"simple_protocol", "exec", "describe_exec", "cache_describe"} {
		for _, enc := range []*store.Encryption{nil, {Current: "k1", Keys: []store.PayloadKey{key}}} {
			t.Run(fmt.Sprintf("%s/sealed=%t", mode, enc != nil), func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				db := openPooled(t, pgtest.URL(t), mode)
				if err := store.Migrate(ctx, db); err != nil {
					t.Fatal(err)
				}
				s, err := store.Open(ctx, db, store.Config{Encryption: enc})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				e, err := s.Outbox.Enqueue(ctx, db, store.EnqueueParams{NotificationID: "big", Endpoint: "https://receiver.example/hooks", Payload: payload})
				if err != nil {
					t.Fatal(err)
				}
				c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				if len(c) != 1 || c[0].DeliveryID != e.ID {
					t.Fatalf("claimed %d deliveries, want delivery %d", len(c), e.ID)
				}
				if !bytes.Equal(c[0].Payload, payload) {
					t.Fatalf("claimed a payload of %d bytes unlike the %d enqueued", len(c[0].Payload), len(payload))
				}
			})
		}
	}
}

// TestPgxTxInEachQueryExecMode: Enqueue, EnqueueMany and Publish in a
// pgx.Tx of a pool in each exec mode that keeps no prepared statement
// write what a worker claims byte for byte, sealed, and an enqueue again
// finds its delivery or collides, as through database/sql.
func TestPgxTxInEachQueryExecMode(t *testing.T) {
	t.Parallel()
	key, err := store.NewPayloadKey("k1", bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"simple_protocol", "exec", "describe_exec", "cache_describe"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dbURL := modeURL(t, pgtest.URL(t), mode)
			db, err := sqlx.Open(postgres.DriverName, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := store.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(ctx, db, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{key}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			pool, err := pgxpool.New(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if _, err := s.Subscriptions.Create(ctx, db, store.SubscriptionParams{
				Tenant: "acme", Endpoint: "https://hooks.example/a", EventTypes: []string{"order.paid"}, KeyID: "k1",
			}); err != nil {
				t.Fatal(err)
			}

			want := map[string][]byte{}
			p := func(id, orderingKey string) store.EnqueueParams {
				payload := []byte(`{"id":"` + id + `","q":"'\\\\ $1 é"}`)
				want[id] = payload
				return store.EnqueueParams{NotificationID: id, Endpoint: "https://hooks.example/b", Payload: payload, OrderingKey: orderingKey, Priority: -5}
			}
			write := func(fn func(tx pgx.Tx) error) error {
				t.Helper()
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if err := fn(tx); err != nil {
					return err
				}
				return tx.Commit(ctx)
			}
			first := p("n-1", "")
			err = write(func(tx pgx.Tx) error {
				if _, err := postgres.Enqueue(ctx, s, tx, first); err != nil {
					return err
				}
				if _, err := postgres.EnqueueMany(ctx, s, tx, []store.EnqueueParams{p("n-2", "k"), p("n-3", "k")}); err != nil {
					return err
				}
				_, err := postgres.Publish(ctx, s, tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "e-1", Payload: []byte(`{"e":1}`)})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			var again store.Enqueued
			if err := write(func(tx pgx.Tx) (err error) { again, err = postgres.Enqueue(ctx, s, tx, first); return err }); err != nil || !again.Existed {
				t.Fatalf("Enqueue again = %+v, %v; want the existing delivery", again, err)
			}
			other := first
			other.Payload = []byte(`{"other":true}`)
			if err := write(func(tx pgx.Tx) error { _, err := postgres.Enqueue(ctx, s, tx, other); return err }); !errors.Is(err, courier.CodeIdempotencyCollision) {
				t.Fatalf("Enqueue of other bytes = %v, want CodeIdempotencyCollision", err)
			}

			c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]byte{}
			for _, d := range c {
				got[d.NotificationID] = d.Payload
			}
			if len(got) != 3 || !bytes.Equal(got["n-1"], want["n-1"]) || !bytes.Equal(got["n-2"], want["n-2"]) || got["n-3"] != nil {
				t.Fatalf("claimed %q, want n-1 and n-2 (n-3 waits behind n-2 on its key) as enqueued, and the published delivery", got)
			}
		})
	}
}
