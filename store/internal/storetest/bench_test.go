package storetest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// migratedStore opens a database with open, migrates it and opens a Store
// on it, closed when tb ends.
func migratedStore(tb testing.TB, open func(tb testing.TB) *sqlx.DB) (*store.Store, *sqlx.DB) {
	tb.Helper()
	db := open(tb)
	ctx := context.Background()
	if err := store.Migrate(ctx, db); err != nil {
		tb.Fatal(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, db
}

var benchPayload = []byte(`{"schema":"courier.example.v1","notification_id":"n","event":"order.paid","amount":1250,"currency":"EUR"}`)

// BenchmarkEnqueue compares Enqueue with a plain INSERT of the same row, each
// in a transaction of its own as an application's request would make
// (on SQLite, which keeps the payload in a table of its own, two INSERTs).
// The target: Enqueue costs at most 1.3x the plain INSERT.
func BenchmarkEnqueue(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name+"/plain-insert", func(b *testing.B) {
			_, db := migratedStore(b, e.open)
			insert := db.Rebind(`INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_sha256, profile, key_id, status,
				priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at)
				VALUES (?, ?, ?, ?, 'courier', '', 'pending', 0, 0, 8, ?, ?, ?, ?)`)
			apart := payloadsApart(db)
			if apart {
				insert = `INSERT INTO courier_outbox (notification_id, endpoint, payload_sha256, profile, key_id, status,
				priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at)
				VALUES (?, ?, ?, 'courier', '', 'pending', 0, 0, 8, ?, ?, ?, ?)`
			}
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				now := time.Now().UnixMicro()
				sum := sha256.Sum256(benchPayload)
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				args := []any{fmt.Sprintf("n-%d", i), "https://r.example/h", benchPayload, hex.EncodeToString(sum[:]), now, now + int64(time.Hour/time.Microsecond), now, now}
				if apart {
					args = slices.Delete(args, 2, 3)
				}
				res, err := tx.ExecContext(ctx, insert, args...)
				if err != nil {
					b.Fatal(err)
				}
				if apart {
					id, _ := res.LastInsertId()
					if _, err := tx.ExecContext(ctx, "INSERT INTO courier_outbox_payload (id, payload) VALUES (?, ?)", id, benchPayload); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(e.name+"/enqueue", func(b *testing.B) {
			s, db := migratedStore(b, e.open)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: "https://r.example/h", Payload: benchPayload}); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClaim measures one claim of 10 rows with 1,000 and 100,000 due
// rows waiting, on a database with statistics (ANALYZE) and on one
// without, as an application's SQLite file seldom has any. The target:
// flat (within 2x) as the backlog grows, either way.
func BenchmarkClaim(b *testing.B) {
	for _, e := range engines {
		for _, due := range []int{1_000, 100_000} {
			for _, analyze := range []bool{true, false} {
				b.Run(fmt.Sprintf("%s/due=%d/stats=%t", e.name, due, analyze), func(b *testing.B) {
					benchClaim(b, e.open, due, analyze)
				})
			}
		}
	}
}

// benchClaim is BenchmarkClaim on one engine, backlog and statistics.
func benchClaim(b *testing.B, open func(tb testing.TB) *sqlx.DB, due int, analyze bool) {
	s, db := migratedStore(b, open)
	fill(b, s, db, "n", due, analyze)
	claimRepeatedly(b, s, db, 10)
}

// claimRepeatedly times b.N claims of up to 10 rows, each of which must
// lease want, and gives the leases back between them, untimed.
func claimRepeatedly(b *testing.B, s *store.Store, db *sqlx.DB, want int) {
	ctx := context.Background()
	release := db.Rebind(`UPDATE courier_outbox SET status = 'pending', attempts = 0, lease_owner = NULL,
		lease_token = NULL, leased_at = NULL, lease_expires_at = NULL WHERE status = 'leased'`)
	b.ResetTimer()
	for range b.N {
		c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "bench", Limit: 10, Lease: time.Minute})
		if err != nil || len(c) != want {
			b.Fatalf("claim: %d rows, %v", len(c), err)
		}
		b.StopTimer()
		if _, err := db.ExecContext(ctx, release); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// fill enqueues n due rows named prefix-i, in transactions of 5,000, and
// runs ANALYZE after when analyze is set.
func fill(b testing.TB, s *store.Store, db *sqlx.DB, prefix string, n int, analyze bool) {
	b.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 5000 {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := start; i < min(n, start+5000); i++ {
			if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("%s-%d", prefix, i), Endpoint: "https://r.example/h", Payload: benchPayload, NotBefore: time.Now().Add(-time.Minute)}); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if !analyze {
		return
	}
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimScheduledBacklog claims with 100,000 rows waiting for a
// later time (a retry backlog) and 5 due: the claim must not walk the
// waiting rows.
func BenchmarkClaimScheduledBacklog(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s, db := migratedStore(b, e.open)
			ctx := context.Background()
			later := time.Now().Add(time.Hour)
			tx, _ := db.BeginTxx(ctx, nil)
			for i := range 100_000 {
				if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("w-%d", i), Endpoint: "https://r.example/h", Payload: benchPayload, NotBefore: later}); err != nil {
					b.Fatal(err)
				}
			}
			tx.Commit()
			fill(b, s, db, "n", 5, true)
			claimRepeatedly(b, s, db, 5)
		})
	}
}

// BenchmarkSettle measures the settle of a batch of 16 outcomes while
// other leases are held: the workers' deliveries in flight, 16 to 10,000
// (on PostgreSQL, what every worker sharing the database holds). It runs
// on a database with statistics and on one without, as for BenchmarkClaim.
// The target: flat as the leases held grow (a settle finds each row by its
// id).
func BenchmarkSettle(b *testing.B) {
	for _, e := range engines {
		for _, held := range []int{16, 1_024, 10_000} {
			for _, analyze := range []bool{true, false} {
				b.Run(fmt.Sprintf("%s/held=%d/stats=%t", e.name, held, analyze), func(b *testing.B) {
					benchSettle(b, e.open, held, analyze)
				})
			}
		}
	}
}

// benchSettle is BenchmarkSettle on one engine, with held leases and
// statistics or none.
func benchSettle(b *testing.B, open func(tb testing.TB) *sqlx.DB, held int, analyze bool) {
	const batch = 16
	s, db := migratedStore(b, open)
	ctx := context.Background()
	out := protocol.For(s)
	claim := func(n int) []protocol.Claimed {
		var got []protocol.Claimed
		for len(got) < n {
			c, err := out.Claim(ctx, protocol.ClaimParams{Owner: "bench", Limit: min(n-len(got), protocol.MaxClaimBatch), Lease: time.Hour})
			if err != nil || len(c) == 0 {
				b.Fatalf("claim: %d rows, %v", len(c), err)
			}
			got = append(got, c...)
		}
		return got
	}
	fill(b, s, db, "held", held, false)
	claim(held) // held for the whole run
	fill(b, s, db, "n", b.N*batch, analyze)
	outcomes := make([]protocol.Outcome, batch)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for i, c := range claim(batch) {
			outcomes[i] = protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded, HTTPStatus: 200}
		}
		b.StartTimer()
		settled, err := out.Settle(ctx, outcomes...)
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range settled {
			if st.Err != nil || st.Status != "succeeded" {
				b.Fatalf("settled %+v", st)
			}
		}
	}
}

// BenchmarkReplayRemember is the shared replay cache's cost per verified
// request: recording a fresh nonce, under one key id whose live nonces
// are counted toward its cap.
func BenchmarkReplayRemember(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s, _ := migratedStore(b, e.open)
			ctx := context.Background()
			expires := time.Now().Add(time.Minute)
			b.ResetTimer()
			for i := range b.N {
				replayed, err := s.Replay.Remember(ctx, "key-1", fmt.Sprintf("nonce-%d", i), expires)
				if err != nil || replayed {
					b.Fatalf("Remember = %v, %v", replayed, err)
				}
			}
		})
	}
}

// BenchmarkClaimBesideDisabledEndpoints claims 10 due rows of a healthy
// endpoint while 1,000 disabled endpoints hold 5 parked deliveries each:
// every claim looks at the endpoints with parked deliveries for room.
func BenchmarkClaimBesideDisabledEndpoints(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s, db := migratedStore(b, e.open)
			ctx := context.Background()
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := range 5_000 {
				if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("d-%d", i), Endpoint: fmt.Sprintf("https://gone-%d.example/h", i%1000), Payload: benchPayload}); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			for i := range 1000 {
				if err := s.Endpoints.Disable(ctx, fmt.Sprintf("https://gone-%d.example/h", i)); err != nil {
					b.Fatal(err)
				}
			}
			if c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "bench", Limit: 10, Lease: time.Minute}); err != nil || len(c) != 0 {
				b.Fatalf("claim parking the disabled endpoints' deliveries: %d, %v", len(c), err)
			}
			fill(b, s, db, "n", 1_000, true)
			claimRepeatedly(b, s, db, 10)
		})
	}
}

// BenchmarkClaimBesideIdleOpenEndpoints claims from a backlog beside 100
// endpoints whose breaker is open, their cool-down over and nothing of
// theirs left to send (their last deliveries failed for good): once a
// probe found nothing, a claim must not probe them again, each probe a
// walk of the due rows. Compare with BenchmarkClaim's due=1000/stats=true.
func BenchmarkClaimBesideIdleOpenEndpoints(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s, db := migratedStore(b, e.open)
			ctx := context.Background()
			fill(b, s, db, "n", 10_000, true)
			opened := time.Now().Add(-2 * time.Minute).UnixMicro()
			insert := db.Rebind(`INSERT INTO courier_endpoints (endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at)
				VALUES (?, 'open', 5, ?, ?, 'receiver_unavailable', ?)`)
			for i := range 100 {
				if _, err := db.ExecContext(ctx, insert, fmt.Sprintf("https://gone-%d.example/h", i), opened, opened+time.Minute.Microseconds(), opened); err != nil {
					b.Fatal(err)
				}
			}
			// The first claim probes each once and finds nothing; the
			// benchmark times the claims after it.
			if _, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "bench", Limit: 10, Lease: time.Minute}); err != nil {
				b.Fatal(err)
			}
			claimRepeatedly(b, s, db, 10)
		})
	}
}

// BenchmarkRedrive measures a Redrive of 20,000 failed deliveries, half of
// them with an ordering key each (failed and skipped, OrderingSkipFailed), beside
// an application that enqueues, one transaction after another, to the
// keys of the redriven deliveries: max-enqueue-wait-ms is the longest one
// of its transactions waited, which on SQLite is about the longest
// Redrive held the one writer at a time, and on PostgreSQL the longest it
// held a key's row.
func BenchmarkRedrive(b *testing.B) {
	const failed, keys = 20_000, 10_000
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			db := e.open(b)
			ctx := context.Background()
			if err := store.Migrate(ctx, db); err != nil {
				b.Fatal(err)
			}
			s, err := store.Open(ctx, db, store.Config{OrderingOnFailure: store.OrderingSkipFailed})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			const ep = "https://r.example/h"
			ps := make([]store.EnqueueParams, failed)
			for i := range ps {
				ps[i] = store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: ep, Payload: benchPayload}
				if i < keys {
					ps[i].OrderingKey = fmt.Sprintf("k-%d", i)
				}
			}
			tx, err := s.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Outbox.EnqueueMany(ctx, tx, ps); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			var worst time.Duration
			for i := range b.N {
				b.StopTimer()
				for _, q := range []string{
					`DELETE FROM courier_outbox WHERE notification_id LIKE 'app-%'`,
					`DELETE FROM courier_ordering_keys`,
					`UPDATE courier_outbox SET status = 'failed', attempts = 1, hold = NULL, last_error_code = 'receiver_unavailable'`,
				} {
					if _, err := db.ExecContext(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
				done := make(chan struct{})
				waited := make(chan time.Duration)
				go func() {
					var longest time.Duration
					for j := 0; ; j++ {
						select {
						case <-done:
							waited <- longest
							return
						default:
						}
						start := time.Now()
						tx, err := s.Begin(ctx)
						if err == nil {
							_, err = s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("app-%d-%d", i, j), Endpoint: ep,
								Payload: benchPayload, OrderingKey: fmt.Sprintf("k-%d", (j*997)%keys)})
							if err == nil {
								err = tx.Commit()
							} else {
								tx.Rollback()
							}
						}
						if err != nil {
							b.Error(err)
						}
						longest = max(longest, time.Since(start))
					}
				}()
				b.StartTimer()
				n, err := s.Outbox.Redrive(ctx, store.RedriveParams{Endpoint: ep})
				b.StopTimer()
				close(done)
				worst = max(worst, <-waited)
				if err != nil || n != failed {
					b.Fatalf("Redrive = %d, %v; want %d", n, err, failed)
				}
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "max-enqueue-wait-ms")
		})
	}
}
