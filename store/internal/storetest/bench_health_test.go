package storetest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// BenchmarkHealth measures Outbox.Health beside 10,000 and 200,000 rows
// that none of its figures but the counts by status need to read:
// finished rows (what the outbox keeps until Prune), and rows scheduled
// for later (a retry backlog, or NotBefore ahead). The backlog Health
// reports is the same throughout: 100 due rows, 10 of them past their
// deadline. The counts by status read every row whatever the query:
// status-counts times that floor alone. The target: Health costs the
// floor and a little more, the little more flat as the rows grow. SQLite
// runs on a database with statistics (ANALYZE) and on one without, as
// for BenchmarkClaim; PostgreSQL with statistics, as autovacuum keeps.
func BenchmarkHealth(b *testing.B) {
	for _, e := range engines {
		for _, analyze := range []bool{true, false} {
			if !analyze && e.name == "postgres" {
				continue
			}
			for _, kind := range []string{"finished", "scheduled"} {
				for _, rows := range []int{10_000, 200_000} {
					b.Run(fmt.Sprintf("%s/stats=%t/%s=%d", e.name, analyze, kind, rows), func(b *testing.B) {
						benchHealth(b, e.open, analyze, kind, rows)
					})
				}
			}
		}
	}
}

// benchHealth is BenchmarkHealth on one engine, statistics or none, and
// rows of one kind.
func benchHealth(b *testing.B, open func(tb testing.TB) *sqlx.DB, analyze bool, kind string, rows int) {
	s, db := migratedStore(b, open)
	ctx := context.Background()
	fillRows(b, db, kind, rows)
	fillRows(b, db, "due", 100)
	if analyze {
		if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("health", func(b *testing.B) {
		for range b.N {
			h, err := s.Outbox.Health(ctx)
			if err != nil || h.Due != 100 || h.Overdue != 10 {
				b.Fatalf("Health = due %d, overdue %d, %v; want 100, 10", h.Due, h.Overdue, err)
			}
		}
	})
	b.Run("status-counts", func(b *testing.B) {
		for range b.N {
			var n []struct {
				Status string `db:"status"`
				N      int    `db:"n"`
			}
			if err := db.SelectContext(ctx, &n, "SELECT status, COUNT(*) AS n FROM courier_outbox GROUP BY status"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fillRows inserts n rows of a kind in one statement, for endpoint
// https://r.example/h: finished (succeeded), scheduled (pending, due in an
// hour) or due (pending, due a minute ago, one in ten past its deadline).
func fillRows(tb testing.TB, db *sqlx.DB, kind string, n int) {
	tb.Helper()
	now := time.Now().UnixMicro()
	sum := sha256.Sum256(benchPayload)
	digest := hex.EncodeToString(sum[:])
	status, ack, deadline := "'pending'", "NULL", "?"
	payloadCol, payloadVal := "payload, ", "?, "
	args := []any{n, benchPayload, digest}
	if payloadsApart(db) {
		payloadCol, payloadVal, args = "", "", []any{n, digest}
	}
	switch kind {
	case "finished":
		status, ack = "'succeeded'", "'"+digest+"'"
		args = append(args, now-time.Minute.Microseconds(), now+time.Hour.Microseconds())
	case "scheduled":
		args = append(args, now+time.Hour.Microseconds(), now+2*time.Hour.Microseconds())
	case "due":
		deadline = "CASE WHEN i % 10 = 0 THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END"
		args = append(args, now-time.Minute.Microseconds(), now-time.Second.Microseconds(), now+time.Hour.Microseconds())
	default:
		tb.Fatalf("fillRows: no kind %q", kind)
	}
	args = append(args, now, now)
	q := db.Rebind(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
		INSERT INTO courier_outbox (notification_id, endpoint, ` + payloadCol + `payload_sha256, profile, key_id, status,
			priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at, ack_sha256)
		SELECT '` + kind + `-' || i, 'https://r.example/h', ` + payloadVal + `?, 'courier', '', ` + status + `,
			0, 0, 8, ?, ` + deadline + `, ?, ?, ` + ack + ` FROM s`)
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		tb.Fatal(err)
	}
	fillPayloads(tb, db, benchPayload)
}

// payloadsApart reports whether db's engine keeps a delivery's payload in
// a table of its own (SQLite, migration 13) rather than in the delivery's
// row: a fill of the outbox leaves the column out there, and gives the
// rows their payloads after (fillPayloads).
func payloadsApart(db *sqlx.DB) bool { return db.DriverName() == sqlite.DriverName }

// fillPayloads gives every delivery without a payload p, where the engine
// keeps payloads apart (payloadsApart).
func fillPayloads(tb testing.TB, db *sqlx.DB, p []byte) {
	tb.Helper()
	if !payloadsApart(db) {
		return
	}
	if _, err := db.ExecContext(context.Background(), benchkit.FillPayloadsSQL, p); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkSubscriptionUpdate measures Subscriptions.Update of one
// subscription among 10,000 and 200,000, on its own (a nil tx). Every read and write it makes finds the row by
// its id. The target: flat as the subscriptions grow.
func BenchmarkSubscriptionUpdate(b *testing.B) {
	for _, e := range engines {
		for _, rows := range []int{10_000, 200_000} {
			b.Run(fmt.Sprintf("%s/subscriptions=%d", e.name, rows), func(b *testing.B) {
				s, db := migratedStore(b, e.open)
				ctx := context.Background()
				q := db.Rebind(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?)
					INSERT INTO courier_subscriptions (tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at)
					SELECT 'tenant-' || (i % 100), 'https://r.example/h', '*', '', 'k1', 'courier', ?, TRUE, 1, 1 FROM s`)
				if _, err := db.ExecContext(ctx, q, rows, fmt.Sprintf("%064d", 0)); err != nil {
					b.Fatal(err)
				}
				if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
					b.Fatal(err)
				}
				p := store.SubscriptionParams{Tenant: "tenant-7", Endpoint: "https://r.example/h", EventTypes: []string{"order.paid"}, KeyID: "k1"}
				b.ResetTimer()
				for i := range b.N {
					p.Paused = i%2 == 0
					if _, err := s.Subscriptions.Update(ctx, nil, int64(rows/2+7), p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkListByStatus measures a first page of Outbox.List filtered by
// status beside 1,000 and 100,000 finished (succeeded) rows: the page of
// a rare status (pending: 10 rows, the oldest) and a first page of the
// common one (succeeded: 100 of them). The target: each page costs what
// it shows, flat as the rows grow: read from an index on the status in
// id order, never by walking every delivery for the few of a status, nor
// by reading and sorting every row of it. A page within a window of time
// (the last hour: every row) reads the same. SQLite runs with statistics
// and without, as for BenchmarkHealth; PostgreSQL with statistics.
func BenchmarkListByStatus(b *testing.B) {
	hour := time.Now().Add(-time.Hour)
	benchmarkListPages(b, func(tb testing.TB, db *sqlx.DB) { fillRows(tb, db, "due", 10) }, []listPage{
		{"pending", store.ListParams{Status: courier.StatusPending, Limit: 100}, 10},
		{"succeeded", store.ListParams{Status: courier.StatusSucceeded, Limit: 100}, 100},
		{"succeeded-last-hour", store.ListParams{Status: courier.StatusSucceeded, Since: hour, Limit: 100}, 100},
	})
}

// BenchmarkListByEndpoint measures a first page of Outbox.List filtered
// by endpoint beside 1,000 and 100,000 finished (succeeded) rows of
// another: the page of a rare endpoint (10 rows, the oldest, under two
// spellings: see fillRare), the same filtered by a finished status its
// rows do not have (none to show), and a first page of the common
// endpoint (100 of its rows). The target: each page costs what it shows,
// flat as the rows grow: read from an index on the endpoint in id order,
// never by walking every delivery of the outbox (or of a status) for the
// few of an endpoint. SQLite runs with statistics and without, as for
// BenchmarkHealth; PostgreSQL with statistics.
func BenchmarkListByEndpoint(b *testing.B) {
	benchmarkListPages(b, func(tb testing.TB, db *sqlx.DB) { fillRare(tb, db, 10) }, []listPage{
		{"rare", store.ListParams{Endpoint: rareEndpointSpelled, Limit: 100}, 10},
		{"rare-succeeded", store.ListParams{Endpoint: rareEndpointSpelled, Status: courier.StatusSucceeded, Limit: 100}, 0},
		{"common", store.ListParams{Endpoint: commonEndpoint, Limit: 100}, 100},
	})
}

// listPage is a first page benchmarkListPages lists, and how many
// deliveries it shows.
type listPage struct {
	name string
	p    store.ListParams
	want int
}

// benchmarkListPages measures each page of Outbox.List on a database of
// each engine that fill filled, beside 1,000 and 100,000 finished rows,
// with statistics and, on SQLite, without; and on PostgreSQL again with
// plan_cache_mode force_generic_plan, as a DBA or a pooler may set it for
// the connections the store is given: every statement planned without
// its values.
func benchmarkListPages(b *testing.B, fill func(testing.TB, *sqlx.DB), pages []listPage) {
	generic := engines[1]
	generic.name, generic.open = "postgres/plan_cache_mode=force_generic_plan", openPostgresGeneric
	for _, e := range append(slices.Clone(engines), generic) {
		for _, analyze := range []bool{true, false} {
			if !analyze && e.driver == postgres.DriverName {
				continue
			}
			for _, rows := range []int{1_000, 100_000} {
				b.Run(fmt.Sprintf("%s/stats=%t/rows=%d", e.name, analyze, rows), func(b *testing.B) {
					s, db := migratedStore(b, e.open)
					ctx := context.Background()
					fill(b, db)
					fillRows(b, db, "finished", rows)
					if analyze {
						if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
							b.Fatal(err)
						}
					}
					for _, c := range pages {
						b.Run(c.name, func(b *testing.B) {
							for range b.N {
								p, err := s.Outbox.List(ctx, c.p)
								if err != nil || len(p.Deliveries) != c.want {
									b.Fatalf("List(%+v) = %d deliveries, %v; want %d", c.p, len(p.Deliveries), err, c.want)
								}
							}
						})
					}
				})
			}
		}
	}
}

// openPostgresGeneric opens a PostgreSQL database whose connections plan
// every statement generically (plan_cache_mode force_generic_plan, a
// setting each connection starts with).
func openPostgresGeneric(tb testing.TB) *sqlx.DB {
	tb.Helper()
	u, err := url.Parse(pgtest.URL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("plan_cache_mode", "force_generic_plan")
	u.RawQuery = q.Encode()
	db, err := sqlx.Open(postgres.DriverName, u.String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
