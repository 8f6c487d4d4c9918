package pgtest

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"
)

// CommitGate is a PostgreSQL database whose transactions that write to a
// table can hold their COMMIT: a deferred constraint trigger on it takes
// an advisory lock, which fires as the transaction commits, before its
// commit record is written, and waits while the test holds the lock,
// whatever the client does meanwhile.
type CommitGate struct {
	db   *sql.DB
	conn *sql.Conn // holds the lock
}

// commitGateKey is the advisory lock a held COMMIT waits for.
const commitGateKey = 740_521

// HoldCommits puts the trigger on table, in db's database, for its
// inserts, and holds the lock: every COMMIT of an insert into table waits
// until Open, or until tb's cleanup.
func HoldCommits(tb testing.TB, db *sql.DB, table string) *CommitGate {
	tb.Helper()
	ctx := tb.Context()
	for _, stmt := range []string{
		// A cancel request (pgx sends one as it gives a query up) is
		// ignored: it comes too late for this COMMIT, as one that arrives
		// once the commit record is written does.
		`CREATE FUNCTION ` + table + `_gate() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			LOOP
				BEGIN
					PERFORM pg_advisory_xact_lock(` + strconv.Itoa(commitGateKey) + `);
					RETURN NULL;
				EXCEPTION WHEN query_canceled THEN
				END;
			END LOOP;
		END $$`,
		"CREATE CONSTRAINT TRIGGER " + table + "_gate AFTER INSERT ON " + table +
			" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + table + "_gate()",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			tb.Fatal(err)
		}
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", commitGateKey); err != nil {
		tb.Fatal(err)
	}
	return &CommitGate{db: db, conn: conn}
}

// Open lets the held COMMITs go on, and every one after.
func (g *CommitGate) Open(tb testing.TB) {
	tb.Helper()
	if _, err := g.conn.ExecContext(tb.Context(), "SELECT pg_advisory_unlock($1)", commitGateKey); err != nil {
		tb.Fatal(err)
	}
}

// WaitHeld waits until a COMMIT waits at the gate.
func (g *CommitGate) WaitHeld(tb testing.TB) {
	tb.Helper()
	WaitForActivity(tb, g.db, "wait_event_type = 'Lock' AND wait_event = 'advisory'")
}

// WaitForActivity waits until a session of db's database is as where says
// (a condition on pg_stat_activity), and fails tb if none is within 20
// seconds.
func WaitForActivity(tb testing.TB, db *sql.DB, where string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 20*time.Second)
	defer cancel()
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "+where).Scan(&n); err != nil {
			tb.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("no session in pg_stat_activity where %s", where)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
