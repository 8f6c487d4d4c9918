package storetest_test

import (
	"database/sql"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/sqlfile"
	"github.com/courier-go/courier/internal/testmain"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/engine"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// engines are the databases the tests and benchmarks here run on.
// PostgreSQL is skipped when no server can be had (see internal/pgtest).
// testEngine is one of the engines the tests run on: its name, its driver's,
// and how a test opens a fresh database of it.
type testEngine struct {
	name   string
	driver string
	open   func(tb testing.TB) *sqlx.DB
}

var engines = []testEngine{
	{"sqlite", sqlite.DriverName, openSQLite},
	{"postgres", postgres.DriverName, openPostgres},
}

func openSQLite(tb testing.TB) *sqlx.DB {
	tb.Helper()
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(filepath.Join(tb.TempDir(), "courier.db"), 0))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func openPostgres(tb testing.TB) *sqlx.DB {
	tb.Helper()
	db, err := sqlx.Open(postgres.DriverName, pgtest.URL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// TestQueriesAgree: every engine defines the same named queries, each
// with the same parameters, in the file of the table its name begins
// with, so package store runs unchanged on either. A statement an engine
// has nothing to do for is empty there, and has no parameters to agree.
// A value one engine keeps apart from the delivery's row is written there
// by a statement of its own, which the other has nothing to do for: the
// statements that write the row take it on the other engine only (apart).
func TestQueriesAgree(t *testing.T) {
	t.Parallel()
	files := map[string]string{ // name prefix -> file
		"schema": "schema.sql", "outbox": "outbox.sql", "attempts": "attempts.sql", "inbox": "inbox.sql",
		"replay": "replay.sql", "subscription": "subscriptions.sql", "endpoint": "endpoints.sql", "contract": "contracts.sql",
		"ordering": "ordering_keys.sql", "payload": "payload_keys.sql",
	}
	params := make(map[string]map[string][]string) // engine -> query -> sorted parameter names
	empty := make(map[string]bool)                 // queries an engine has nothing to do for
	for _, e := range engines {
		eng, ok := engine.Lookup(e.driver)
		if !ok {
			t.Fatalf("%s: no engine registered for %q", e.name, e.driver)
		}
		paths, err := fs.Glob(eng.SQL, "queries/*.sql")
		if err != nil || len(paths) == 0 {
			t.Fatalf("%s: no query files (%v)", e.name, err)
		}
		params[e.name] = make(map[string][]string)
		for _, p := range paths {
			b, err := fs.ReadFile(eng.SQL, p)
			if err != nil {
				t.Fatal(err)
			}
			stmts, err := sqlfile.Parse(string(b))
			if err != nil {
				t.Fatalf("%s %s: %v", e.name, p, err)
			}
			for name, text := range stmts {
				prefix, _, _ := cutPrefix(name)
				if want := files[prefix]; filepath.Base(p) != want {
					t.Errorf("%s: query %s is in %s, want %s", e.name, name, filepath.Base(p), want)
				}
				params[e.name][name] = sqlfile.Params(text)
				if strings.TrimSpace(text) == "" {
					empty[name] = true
				}
			}
		}
	}
	sq, pg := params["sqlite"], params["postgres"]
	if a, b := slices.Sorted(maps.Keys(sq)), slices.Sorted(maps.Keys(pg)); !slices.Equal(a, b) {
		t.Fatalf("query names differ\nsqlite:   %v\npostgres: %v", a, b)
	}
	// SQLite keeps a delivery's payload in a table of its own (migration
	// 13), which outbox_payload_write writes: an UPDATE writes a row
	// whole there when it changes its size, payload and all.
	apart := map[string]string{"payload": "outbox_payload_write"} // parameter -> SQLite's statement
	for param, stmt := range apart {
		if !slices.Contains(sq[stmt], param) || len(pg[stmt]) != 0 {
			t.Errorf("%s: sqlite takes %v, postgres %v; want :%s on sqlite, and nothing to do on postgres", stmt, sq[stmt], pg[stmt], param)
		}
	}
	for name, want := range sq {
		got := pg[name]
		if empty[name] {
			continue
		}
		got = slices.DeleteFunc(slices.Clone(got), func(p string) bool {
			_, ok := apart[p]
			return ok && !slices.Contains(want, p)
		})
		if !slices.Equal(got, want) {
			t.Errorf("%s: parameters differ: sqlite %v, postgres %v", name, want, pg[name])
		}
	}
}

// cutPrefix splits a query name at its first underscore.
func cutPrefix(name string) (prefix, rest string, ok bool) {
	for i := range len(name) {
		if name[i] == '_' {
			return name[:i], name[i+1:], true
		}
	}
	return name, "", false
}

// TestLookupsReadAnIndex: the lookups by identity (Outbox.Lookup, and List
// by notification id) are planned on an index on both engines, never as a
// scan of the outbox. PostgreSQL is told to avoid sequential scans, so its
// plan shows a scan only where no index serves the query.
func TestLookupsReadAnIndex(t *testing.T) {
	t.Parallel()
	args := map[string]any{
		"notification_id": "order-7", "endpoint": "", "status": "", "since": int64(0), "until": int64(1 << 62),
		"max_id": int64(1<<63 - 1), "limit": 101,
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db := e.open(t)
			ctx := t.Context()
			if err := store.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"outbox_lookup", "outbox_list_by_notification"} {
				text, vals := boundQuery(t, e.driver, "queries/outbox.sql", name, args)
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				explain, scan := "EXPLAIN QUERY PLAN ", "SCAN courier_outbox"
				if e.name == "postgres" {
					if _, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
						t.Fatal(err)
					}
					explain, scan = "EXPLAIN ", "Seq Scan on courier_outbox"
				}
				plan, err := planText(tx.QueryContext(ctx, explain+text, vals...))
				tx.Rollback()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if strings.Contains(plan, scan) || plan == "" {
					t.Errorf("%s is planned as a scan of the outbox:\n%s", name, plan)
				}
			}
		})
	}
}

// TestHotPlansNeedNoStatistics: on SQLite, the statements a worker runs
// on every claim and settle, and Health's probes, are planned on the
// index that bounds their work, on a database without statistics, as an
// application's SQLite file seldom has any. Left to itself the planner
// read them by courier_outbox_status: a claim read the whole backlog, a
// settle every lease, parsing its JSON batch again for each, and Health
// every unfinished delivery to count those a changed contract holds back.
func TestHotPlansNeedNoStatistics(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{
		"batch": `[{"id":1,"token":"t","result":"succeeded"}]`, "ids": "[1]", "now": int64(1),
		"owner": "w", "lease_expires_at": int64(2), "cap": 8, "endpoint": "https://r.example/h", "limit": 100,
		"priority": 0, "busy": `["https://busy.example/h"]`,
	}
	byID := "SEARCH courier_outbox USING INTEGER PRIMARY KEY"
	for _, c := range []struct {
		file, name, want string
	}{
		{"queries/outbox.sql", "outbox_claim_pick", "SEARCH o USING INDEX courier_outbox_due (priority=? AND next_attempt_at<?)"},
		{"queries/outbox.sql", "outbox_claim", "SEARCH o USING INTEGER PRIMARY KEY"},
		// The leased rows' payloads, from their table (migration 13), by its key.
		{"queries/outbox.sql", "outbox_claim", "SEARCH p USING INTEGER PRIMARY KEY (rowid=?)"},
		{"queries/outbox.sql", "outbox_claim_parked", "SEARCH p USING INTEGER PRIMARY KEY (rowid=?)"},
		{"queries/outbox.sql", "outbox_settle", byID},
		{"queries/outbox.sql", "outbox_release", byID},
		{"queries/outbox.sql", "outbox_claim_probe", "courier_outbox USING INDEX courier_outbox_due"},
		{"queries/outbox.sql", "outbox_claim_parked", "courier_outbox USING INDEX courier_outbox_parked (endpoint=?"},
		// The leases attempts_log_expired_leases logged, by their ids.
		{"queries/outbox.sql", "outbox_reclaim_expired_leases", byID},
		{"queries/outbox.sql", "outbox_health_expired", "courier_outbox_leases (lease_expires_at<?)"},
		// Health's backlog (due, oldest, overdue): the due rows, read as a
		// range per priority (never the rows scheduled later), and the
		// parked rows, never every delivery.
		{"queries/outbox.sql", "outbox_health_due", "SEARCH o USING INDEX courier_outbox_due (priority=? AND next_attempt_at<?)"},
		{"queries/outbox.sql", "outbox_health_due", "courier_outbox_due (priority>?)"},
		{"queries/outbox.sql", "outbox_health_due", "SCAN q USING INDEX courier_outbox_parked"},
		{"queries/outbox.sql", "outbox_expire_parked", "courier_outbox USING INDEX courier_outbox_parked"},
		{"queries/attempts.sql", "attempts_log_expired_leases", "courier_outbox_leases (lease_expires_at<?)"},
		// What every claim reads first: whether a lease expired (the
		// expired leases alone), the priorities (a step of the due index
		// per priority) and the parked endpoints (a step of the parked
		// index per endpoint), never the whole backlog.
		{"queries/outbox.sql", "outbox_claim_look", "courier_outbox_leases (lease_expires_at<?)"},
		{"queries/outbox.sql", "outbox_claim_look", "courier_outbox_due (priority>?)"},
		{"queries/outbox.sql", "outbox_claim_look", "courier_outbox_parked (endpoint>?)"},
		// Health's count of deliveries a changed contract holds back: each
		// pin probes the contract index, and no pin reads nothing.
		{"queries/contracts.sql", "contract_mismatched", "SEARCH m USING INDEX courier_outbox_contract (endpoint=?"},
	} {
		text, vals := boundQuery(t, sqlite.DriverName, c.file, c.name, args)
		plan, err := planText(db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+text, vals...))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(plan, c.want) || strings.Contains(plan, "courier_outbox_status") {
			t.Errorf("%s is not planned on %q:\n%s", c.name, c.want, plan)
		}
	}
}

// TestListPagesSeekTheirCursor: on SQLite, a page of Outbox.List after
// the first (ListParams.Before) reads the outbox from its cursor down, by
// the primary key, never from the newest delivery: written as "no cursor
// or below it", the condition gave SQLite no range, and each page read
// every delivery newer than the cursor before the first it showed.
func TestListPagesSeekTheirCursor(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{
		"status": "", "endpoint": "", "endpoint_spelled": "", "notification_id": "", "id": int64(0),
		"since": int64(0), "until": int64(1 << 62), "max_id": int64(999), "limit": 101,
	}
	for _, name := range []string{"outbox_list"} {
		text, vals := boundQuery(t, sqlite.DriverName, "queries/outbox.sql", name, args)
		plan, err := planText(db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+text, vals...))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(plan, "USING INTEGER PRIMARY KEY (rowid<?)") {
			t.Errorf("%s does not seek its cursor:\n%s", name, plan)
		}
	}
}

// TestHealthPlansWithStatistics: on SQLite, with statistics (ANALYZE, as
// an application may run), Health's count of disabled endpoints with
// deliveries waiting reads the waiting rows from the status index, never
// the whole outbox: the planner read every row, finished ones too, on
// every Health, an endpoint disabled or not. Its backlog stays a range
// per priority of the due index.
func TestHealthPlansWithStatistics(t *testing.T) {
	t.Parallel()
	_, db := migratedStore(t, openSQLite)
	fillRows(t, db, "finished", 2_000)
	fillRows(t, db, "scheduled", 500)
	fillRows(t, db, "due", 10)
	if _, err := db.ExecContext(t.Context(), "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"now": time.Now().UnixMicro()}
	for _, c := range []struct {
		file, name, want string
	}{
		{"queries/endpoints.sql", "endpoint_disabled_waiting", "SEARCH courier_outbox USING INDEX courier_outbox_status (status=?)"},
		{"queries/outbox.sql", "outbox_health_due", "courier_outbox_due (priority=? AND next_attempt_at<?)"},
		// The quarantined rows that could not be opened: those rows alone.
		{"queries/outbox.sql", "outbox_health_unreadable", "SEARCH courier_outbox USING INDEX courier_outbox_status (status=?)"},
	} {
		text, vals := boundQuery(t, sqlite.DriverName, c.file, c.name, args)
		plan, err := planText(db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+text, vals...))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(plan, c.want) || strings.Contains(plan, "SCAN courier_outbox") {
			t.Errorf("%s is not planned on %q:\n%s", c.name, c.want, plan)
		}
	}
}

// TestHealthReadsItsBacklogByRangeOnPostgres: on PostgreSQL, with
// statistics, Health's backlog reads the due index as a range per
// priority, (priority, next_attempt_at <= now): the rows waiting for a
// later time (a retry backlog) are never walked. Planned as a join, it
// read every row of the due index for next_attempt_at.
func TestHealthReadsItsBacklogByRangeOnPostgres(t *testing.T) {
	t.Parallel()
	_, db := migratedStore(t, openPostgres)
	fillRows(t, db, "scheduled", 5_000)
	fillRows(t, db, "due", 10)
	if _, err := db.ExecContext(t.Context(), "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	text, vals := boundQuery(t, postgres.DriverName, "queries/outbox.sql", "outbox_health_due", map[string]any{"now": time.Now().UnixMicro()})
	plan, err := planText(db.QueryContext(t.Context(), "EXPLAIN "+text, vals...))
	if err != nil {
		t.Fatal(err)
	}
	ranged := regexp.MustCompile(`Index Cond: \(\(priority = \S+\) AND \(next_attempt_at <= `)
	if !ranged.MatchString(plan) || strings.Contains(plan, "Seq Scan on courier_outbox") {
		t.Errorf("outbox_health_due does not read the due index by priority and time:\n%s", plan)
	}
}

// TestSettleReadsByIDOnPostgres: on PostgreSQL, with the statistics
// autovacuum keeps, the settles and the release read their batch's rows by
// primary key alone, not every lease (or the whole outbox): with many
// workers sharing the database, a settle must not cost what all of them
// hold in flight. A third of the outbox is leased here.
func TestSettleReadsByIDOnPostgres(t *testing.T) {
	t.Parallel()
	s, db := migratedStore(t, openPostgres)
	ctx := t.Context()
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3_000 {
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1_000, Lease: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"batch": `[{"id":1,"token":"t","result":"succeeded"}]`, "now": int64(1)}
	for _, name := range []string{"outbox_settle", "outbox_settle_plain", "outbox_release"} {
		text, vals := boundQuery(t, postgres.DriverName, "queries/outbox.sql", name, args)
		plan, err := planText(db.QueryContext(ctx, "EXPLAIN "+text, vals...))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(plan, "courier_outbox_pkey") || strings.Contains(plan, "courier_outbox_leases") ||
			strings.Contains(plan, "Seq Scan on courier_outbox") {
			t.Errorf("%s does not read its rows by primary key alone:\n%s", name, plan)
		}
	}
}

// boundQuery returns the text of the named query in file of the engine
// registered for driver, with its parameters' values taken from args, a
// bound's (engine.Bound) where args has none, as package store binds it.
func boundQuery(t testing.TB, driver, file, name string, args map[string]any) (string, []any) {
	t.Helper()
	eng, _ := engine.Lookup(driver)
	b, err := fs.ReadFile(eng.SQL, file)
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := sqlfile.Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	text, params := sqlfile.Compile(stmts[name], eng.Placeholder)
	vals := make([]any, len(params))
	for i, p := range params {
		v, ok := args[p]
		if !ok {
			v, _ = engine.Bound(p)
		}
		vals[i] = v
	}
	return text, vals
}

// planText joins the last column of every row of an EXPLAIN.
func planText(rows *sql.Rows, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		lines = append(lines, fmt.Sprint(vals[len(vals)-1]))
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// TestClaimPickReadsTheDueIndexInOrder: on PostgreSQL, with statistics
// that show one endpoint holding the backlog (a deployment that sends to
// one receiver), the claim's pick reads the due index in claim order and
// stops at its LIMIT, whatever endpoints the claim found busy: planned on
// the endpoint column's statistics, the busy filter made the planner
// expect almost no row to pass, and it sorted the whole backlog on every
// claim (135 ms at 100,000 due).
func TestClaimPickReadsTheDueIndexInOrder(t *testing.T) {
	t.Parallel()
	s, db := migratedStore(t, openPostgres)
	fill(t, s, db, "n", 5_000, true)
	for _, busy := range []string{`[]`, `["https://busy.example/h"]`} {
		text, vals := boundQuery(t, postgres.DriverName, "queries/outbox.sql", "outbox_claim_pick", map[string]any{
			"now": time.Now().UnixMicro(), "priority": 0, "limit": 10, "busy": busy,
		})
		tx, err := db.BeginTxx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := planText(tx.QueryContext(t.Context(), "EXPLAIN "+text, vals...))
		tx.Rollback()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "Index Scan using courier_outbox_due") || strings.Contains(plan, "Sort") {
			t.Errorf("busy %s: outbox_claim_pick is not planned as an ordered read of courier_outbox_due:\n%s", busy, plan)
		}
	}
}

// onEveryEngine runs test as a parallel subtest on each engine, given the
// engine and a freshly migrated store and its database.
func onEveryEngine(t *testing.T, test func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			s, db := migratedStore(t, e.open)
			test(t, e, s, db)
		})
	}
}
