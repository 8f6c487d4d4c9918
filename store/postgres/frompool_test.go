package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// TestAStoreOverAPgxpoolGivesItBackNoListeningConnection: a Store opened
// over the application's pgxpool (stdlib.OpenDBFromPool) listens for
// wake-ups on a connection of that pool. Once the listening stops, the
// connection goes back to the pgxpool: it went back still LISTENing, its
// notifications unread (holding the server's queue of them back) for as
// long as the application's pool kept it. None of the pool's connections
// listens to anything now.
func TestAStoreOverAPgxpoolGivesItBackNoListeningConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, pgtest.URL(t)+"&pool_max_conns=4")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := sqlx.NewDb(stdlib.OpenDBFromPool(pool), postgres.DriverName)
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	_, stop, err := protocol.For(s).Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stop()

	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range pool.Stat().MaxConns() {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		var channels []string
		rows, err := c.Query(ctx, "SELECT pg_listening_channels()")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var ch string
			if err := rows.Scan(&ch); err != nil {
				t.Fatal(err)
			}
			channels = append(channels, ch)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(channels) != 0 {
			t.Fatalf("connection %d of the application's pool listens to %v after the Store stopped listening", c.Conn().PgConn().PID(), channels)
		}
	}
}
