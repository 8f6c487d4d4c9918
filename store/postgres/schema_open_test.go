package postgres_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/refusing"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// afterQuery is a pgx tracer that runs fn once, as the first query whose
// SQL contains marker ends (its rows read and closed). fn stands for
// another process acting at that moment.
type afterQuery struct {
	marker string
	fn     func()
	once   sync.Once
}

type querySQLKey struct{}

func (a *afterQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, querySQLKey{}, d.SQL)
}

func (a *afterQuery) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if q, _ := ctx.Value(querySQLKey{}).(string); strings.Contains(q, a.marker) {
		a.once.Do(a.fn)
	}
}

// TestAStoreOpenedWhileANewerCourierMigratesStopsItsClaims: a rolling
// upgrade. An older process opens its Store while a newer courier's
// migration commits, after Open's guard read the version and the columns;
// the migration says older couriers must not run on its schema (one that
// only adds lets them: testRollingDeployOnAnAdditiveNewerSchema).
// Open read the fingerprint claims compare with after the guard, took the
// newer schema's for the one it had checked, and its claims went on for
// good, where a Store opened a moment earlier stops them
// (TestClaimsStopAfterANewerMigrationWithoutColumns). The fingerprint is
// read before the guard now: the first claim past SchemaRecheck sees it
// changed and refuses, as a fresh Open does.
func TestAStoreOpenedWhileANewerCourierMigratesStopsItsClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	newer := sqlx.MustOpen(postgres.DriverName, dbURL)
	defer newer.Close()
	if err := store.Migrate(ctx, newer); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// The newer courier's next migration, once the guard read the columns,
	// which this courier must not run on.
	cfg.Tracer = &afterQuery{marker: "AS column_name", fn: func() {
		if _, err := newer.ExecContext(ctx, `ALTER TABLE courier_outbox ADD COLUMN newer_column TEXT;
			INSERT INTO courier_schema (version, applied_at) SELECT max(version) + 1, 1 FROM courier_schema;
			INSERT INTO courier_schema (version, applied_at) SELECT -max(version), 1 FROM courier_schema`); err != nil {
			t.Errorf("the newer migration: %v", err)
		}
	}}
	db := sqlx.NewDb(stdlib.OpenDB(*cfg), postgres.DriverName)
	defer db.Close()

	var now atomic.Int64
	now.Store(time.Now().UnixMicro())
	s, err := store.Open(ctx, db, store.Config{Now: func() time.Time { return time.UnixMicro(now.Load()) }})
	if err != nil {
		t.Fatalf("Open, which checked the schema before the newer migration: %v", err)
	}
	defer s.Close()
	if _, err := store.Open(ctx, newer, store.Config{}); !errors.Is(err, courier.CodeSchemaTooNew) {
		t.Fatalf("a fresh Open after the newer migration = %v, want schema_too_new", err)
	}
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: "n1", Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	now.Add(time.Minute.Microseconds()) // well past SchemaRecheck
	c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if !errors.Is(err, courier.CodeSchemaTooNew) || len(c) != 0 {
		t.Fatalf("claim on the newer schema = %d leased, %v; want none, schema_too_new", len(c), err)
	}
}

// TestMigrateAndOpenWithoutAServerAreDatabaseUnavailable: Migrate and Open
// on a pool whose server refuses connections, or hangs up on them, fail
// with code database_unavailable, as every other store call on a lost
// connection does; they had no code.
func TestMigrateAndOpenWithoutAServerAreDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		server func(testing.TB) string // its address
	}{
		{"refused", refusing.Addr},
		{"hung up on", hangingUpServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := sqlx.MustOpen(postgres.DriverName, "postgres://courier@"+tc.server(t)+"/courier?sslmode=disable&connect_timeout=10")
			defer db.Close()
			if err := store.Migrate(ctx, db); !errors.Is(err, courier.CodeDatabaseUnavailable) {
				t.Errorf("Migrate = %v (code %q), want database_unavailable", err, courier.CodeOf(err))
			}
			if _, err := store.Open(ctx, db, store.Config{}); !errors.Is(err, courier.CodeDatabaseUnavailable) {
				t.Errorf("Open = %v (code %q), want database_unavailable", err, courier.CodeOf(err))
			}
		})
	}
}

// hangingUpServer returns the address of a server on 127.0.0.1 that
// closes every connection as it accepts it.
func hangingUpServer(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed
			}
			c.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return l.Addr().String()
}
