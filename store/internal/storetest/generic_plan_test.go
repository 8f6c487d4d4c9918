package storetest_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/sqlfile"
	"github.com/courier-go/courier/store/internal/engine"
	"github.com/courier-go/courier/store/postgres"
)

// PostgreSQL plans a statement pgx has prepared (it prepares each one once
// per connection) with its parameters' values for its first five
// executions, then, under plan_cache_mode auto (the default), may keep a
// generic plan, made without them, for good; under force_generic_plan,
// which a DBA or a pooler may set, it plans generically from the first.
// A generic plan cannot see which status or endpoint a page asks for, nor
// that a window of time was given at all: the tests here read the plans
// the plan cache keeps.

// The files whose statements the tests here read: every table a worker,
// a publisher, a receiver or an operator reads or writes.
var genericPlanFiles = []string{
	"outbox", "attempts", "inbox", "replay", "endpoints", "contracts", "ordering_keys", "subscriptions", "payload_keys",
}

// TestGenericPlansReadWhatCustomPlansRead: on PostgreSQL, on an outbox of
// 50,000 finished deliveries and a small backlog, with statistics, the
// generic plan of every statement courier runs reads courier_outbox (and
// the attempts log, the inbox and the replay cache, which grow with the
// traffic too) no more than its custom plan does for the values that ask
// the most of it (a rare status, a rare endpoint): it scans one whole,
// walks an index through it or sorts what it read only where the custom
// plan does. Under force_generic_plan, which plans every statement
// generically, a statement so costs what it costs under auto; under auto
// (the default), after ten executions with values that vary as a
// worker's and an operator's do, the plan the cache keeps reads no more
// either, whichever it keeps (the statements it keeps generic plans for
// are logged). A statement no one plan serves (a page within a window of
// time, a count of the finished deliveries a prune would delete) the
// store has planned with its values whatever the setting (withValues),
// and it is read so here.
//
// Generically, a page of Outbox.List by status read every delivery of the
// status from courier_outbox_status and sorted them, and a page by
// endpoint walked the primary key through the whole outbox for a rare
// endpoint's few: a window of time that the page may not have is taken to
// leave a two-hundredth of the rows, and a status or endpoint, its value
// unknown, to hold as many as any other. And a prune of the attempts log,
// the inbox or the replay cache hashed the whole table to delete a
// batch: a LIMIT of unknown size is taken to be a tenth of the rows.
func TestGenericPlansReadWhatCustomPlansRead(t *testing.T) {
	t.Parallel()
	db := genericPlanOutbox(t)
	ctx := t.Context()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer conn.ExecContext(context.WithoutCancel(ctx), "RESET plan_cache_mode")
	set := func(t *testing.T, mode string) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
	}
	statements := genericPlanStatements(t)
	custom := make(map[string]string)
	set(t, "force_custom_plan")
	for _, q := range statements {
		if custom[q.name], err = explainPrepared(ctx, conn, q, 0); err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
	}
	t.Run("plan_cache_mode=force_generic_plan", func(t *testing.T) {
		set(t, "force_generic_plan")
		for _, q := range statements {
			plan, err := explainPrepared(ctx, conn, q, 0)
			if err != nil {
				t.Fatalf("%s: %v", q.name, err)
			}
			if extra := readsBeyond(plan, custom[q.name]); len(extra) > 0 {
				t.Errorf("%s: its generic plan reads %v, its custom plan does not:\n%s\ncustom plan:\n%s", q.name, extra, plan, custom[q.name])
			}
		}
	})
	t.Run("plan_cache_mode=auto", func(t *testing.T) {
		set(t, "auto")
		var generic []string
		for _, q := range statements {
			plan, err := explainPrepared(ctx, conn, q, 10)
			if err != nil {
				t.Fatalf("%s: %v", q.name, err)
			}
			if !strings.HasPrefix(plan, "generic\n") {
				continue
			}
			generic = append(generic, q.name)
			if extra := readsBeyond(plan, custom[q.name]); len(extra) > 0 {
				t.Errorf("%s: the generic plan the cache keeps reads %v, its custom plan does not:\n%s\ncustom plan:\n%s", q.name, extra, plan, custom[q.name])
			}
		}
		t.Logf("%d of %d statements keep a generic plan: %v", len(generic), len(statements), generic)
	})
}

// genericPlanOutbox is a migrated PostgreSQL database with statistics
// whose outbox holds 50,000 finished deliveries, a few failed, and a small
// due backlog, ten of it for a rare endpoint under its two spellings (see
// fillRare); its attempts log holds an attempt per finished delivery and
// its inbox as many notifications, and its replay cache as many nonces,
// each of a key of its own (so as many counts).
func genericPlanOutbox(t *testing.T) *sqlx.DB {
	t.Helper()
	_, db := migratedStore(t, openPostgres)
	fillRare(t, db, 10)
	fillRows(t, db, "finished", 50_000)
	fillRows(t, db, "due", 20)
	for _, q := range []string{
		`UPDATE courier_outbox SET status = 'failed', ack_sha256 = NULL, last_error_code = 'http_status'
			WHERE notification_id IN ('finished-7', 'finished-700', 'finished-7000', 'finished-40000')`,
		`INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome)
			SELECT id, 1, 'w', updated_at, updated_at + 60000000, updated_at, 1000, status FROM courier_outbox WHERE status = 'succeeded'`,
		`INSERT INTO courier_inbox (sender, dedupe_key, payload_sha256, status, ack, created_at, updated_at)
			SELECT 's', notification_id, payload_sha256, 'completed', '\x7b7d', created_at, updated_at FROM courier_outbox WHERE status = 'succeeded'`,
		`INSERT INTO courier_replay (key_id, nonce, expires_at) SELECT notification_id, 'n', updated_at FROM courier_outbox WHERE status = 'succeeded'`,
		"ANALYZE",
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// A genericPlanStatement is a statement of the PostgreSQL engine, bound
// to the values that ask the most of its plan, and to others it is run
// with in turn (varied), as a worker's and an operator's calls vary.
type genericPlanStatement struct {
	name   string
	text   string
	vals   []any
	varied [][]any
	setup  string // run first in its transaction, as the store does (withValues)
}

// withValues are the statements no one plan serves, which the store runs
// in a transaction of their own after one that has them planned with
// their values, whatever plan_cache_mode says. The store runs every
// prune's count so (Store.count); the others, which one plan serves, are
// read here as the cache may plan them.
var withValues = map[string]string{
	"outbox_list_by_status_window": "outbox_plan_with_values",
	"outbox_prune_count":           "outbox_plan_with_values",
}

// genericPlanStatements returns every statement of genericPlanFiles but
// those with nothing to do on PostgreSQL and those that set a setting of
// their transaction (SET LOCAL), which have no plan.
func genericPlanStatements(t *testing.T) []genericPlanStatement {
	t.Helper()
	now := time.Now().UnixMicro()
	args := map[string]any{
		"now": now, "endpoint": rareEndpoint, "endpoint_spelled": rareEndpointSpelled, "limit": 101, "status": "failed", "id": 1,
		"ordering_key": "k", "batch": `[{"id":1,"token":"t","result":"succeeded"}]`, "key_id": "", "payload_sha256": strings.Repeat("a", 64),
		"notification_id": "order-7", "payload_key_id": "", "dedupe_key": "d", "cap": 8, "until": int64(math.MaxInt64), "since": 0,
		"sender": "s", "profile": "courier", "owner": "w", "max_id": int64(math.MaxInt64), "before": now - time.Hour.Microseconds(), "after": 0, "priority": 0,
		"trace_state": nil, "trace_parent": nil, "token": "t", "tenant": "t", "payload": benchPayload, "max_attempts": 8,
		"event_type": "e", "deadline": now + time.Hour.Microseconds(), "subscription_fingerprint": "", "next_attempt_at": now, "lease_expires_at": now + time.Minute.Microseconds(),
		"ids": "[1]", "ack": nil, "probe_until": now, "nonce": "n", "live_bucket": 1, "hold": nil, "head_id": 1, "fingerprint": "f",
		"event_types": "e", "enqueued_max_attempts": 8, "disable_after": 10, "code": "c", "capabilities_sha256": strings.Repeat("a", 64),
		"budget": 8, "active": true, "tokens": 1.0, "subscription_id": nil, "state": "open", "stale_before": now, "reason": nil,
		"rate": 0, "open_until": now, "max_in_flight": 0, "last_updated_at": now, "last_id": int64(math.MaxInt64), "keys": "[]",
		"failing_since": now, "expires_at": now, "every": true, "delivery_id": 1, "contract_sha256": nil, "consecutive_failures": 0,
		"busy": "[]", "burst": 1, "after_updated_at": 0, "after_id": 0,
	}
	// What varies from one call to the next.
	varied := []map[string]any{
		{"status": "succeeded", "endpoint": commonEndpoint, "endpoint_spelled": commonEndpoint},
		{"status": "pending", "endpoint": rareEndpoint, "endpoint_spelled": rareEndpoint, "ids": "[2, 3]", "limit": 11},
		{"status": "failed", "endpoint": commonEndpoint, "endpoint_spelled": commonEndpoint, "id": 40_000, "max_id": int64(40_000)},
		{"status": "succeeded", "endpoint": rareEndpoint, "endpoint_spelled": rareEndpointSpelled, "priority": 1},
		{"status": "suppressed", "endpoint": "https://new.example/h", "endpoint_spelled": "https://new.example/h", "batch": `[{"id":5,"token":"t","result":"retry"}]`},
	}
	// A parameter of another type than its namesakes elsewhere.
	overrides := map[string]map[string]any{
		"endpoint_page":          {"after": ""},
		"contract_page":          {"after": ""},
		"inbox_complete_claimed": {"token": now},
		"inbox_release_claimed":  {"token": now},
		// Outbox.List runs it with no status and no endpoint, the others
		// with them (see Outbox.List).
		"outbox_list": {"status": "", "endpoint": "", "endpoint_spelled": ""},
	}
	eng, _ := engine.Lookup(postgres.DriverName)
	var out []genericPlanStatement
	for _, f := range genericPlanFiles {
		file := "queries/" + f + ".sql"
		b, err := fs.ReadFile(eng.SQL, file)
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := sqlfile.Parse(string(b))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range slices.Sorted(maps.Keys(stmts)) {
			if stmts[name] == "" || strings.HasPrefix(stmts[name], "SET ") {
				continue
			}
			a := maps.Clone(args)
			maps.Copy(a, overrides[name])
			q := genericPlanStatement{name: name, setup: stmts[withValues[name]]}
			q.text, q.vals = boundQuery(t, postgres.DriverName, file, name, a)
			for i := range 10 {
				v := maps.Clone(a)
				maps.Copy(v, varied[i%len(varied)])
				maps.Copy(v, overrides[name])
				v["now"] = now + int64(i)
				_, vals := boundQuery(t, postgres.DriverName, file, name, v)
				q.varied = append(q.varied, vals)
			}
			out = append(out, q)
		}
	}
	return out
}

// explainPrepared PREPAREs q on conn, as pgx prepares every statement the
// store runs, executes it runs times, with q.varied's values in turn
// (each in a savepoint of its own: a value that fails the statement's
// conditions only ends that execution), and returns the plan EXPLAIN
// EXECUTE shows with q.vals: the plan the connection's plan_cache_mode has
// its next execution take. All in a transaction it rolls back, which runs
// q.setup first. Once the statement has run, the plan begins with a line
// saying whether the plan cache keeps a generic plan for it ("generic")
// or plans each execution with its values ("custom").
func explainPrepared(ctx context.Context, conn *sql.Conn, q genericPlanStatement, runs int) (string, error) {
	if _, err := conn.ExecContext(ctx, "PREPARE courier_plan AS "+q.text); err != nil {
		return "", err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DEALLOCATE courier_plan")
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return "", err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	if q.setup != "" {
		if _, err := conn.ExecContext(ctx, q.setup); err != nil {
			return "", err
		}
	}
	prefix := ""
	if runs > 0 {
		for i := range runs {
			for _, s := range []string{"SAVEPOINT run", "EXECUTE courier_plan" + literals(q.varied[i%len(q.varied)]), "RELEASE SAVEPOINT run"} {
				if _, err := conn.ExecContext(ctx, s); err != nil {
					if _, err := conn.ExecContext(ctx, "ROLLBACK TO SAVEPOINT run"); err != nil {
						return "", err
					}
					break
				}
			}
		}
		var generic, custom int
		if err := conn.QueryRowContext(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'courier_plan'").Scan(&generic, &custom); err != nil {
			return "", err
		}
		prefix = "custom\n"
		if generic > 0 {
			prefix = "generic\n"
		}
	}
	plan, err := planText(conn.QueryContext(ctx, "EXPLAIN EXECUTE courier_plan"+literals(q.vals)))
	return prefix + plan, err
}

// literals writes vals as EXECUTE's list of arguments: each a literal of
// unknown type, which takes the type PREPARE gave its parameter.
func literals(vals []any) string {
	if len(vals) == 0 {
		return ""
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		switch v := v.(type) {
		case nil:
			out[i] = "NULL"
		case []byte:
			out[i] = `'\x` + hex.EncodeToString(v) + "'"
		default:
			out[i] = "'" + strings.ReplaceAll(fmt.Sprint(v), "'", "''") + "'"
		}
	}
	return "(" + strings.Join(out, ", ") + ")"
}

// A scan of a table that grows with the traffic, in a PostgreSQL plan: a
// sequential scan of it, or an index scan, named by its index.
var growingScan = regexp.MustCompile(`(Seq Scan|Index Scan|Index Only Scan)(?: Backward)?(?: using (\S+))? on (courier_outbox|courier_attempts|courier_inbox|courier_replay|courier_replay_counts)\b`)

// unfinishedIndexes are the partial indexes of courier_outbox that hold
// unfinished deliveries only: what they hold is the backlog, however many
// deliveries the outbox has finished.
var unfinishedIndexes = []string{
	"courier_outbox_due", "courier_outbox_leases", "courier_outbox_parked", "courier_outbox_waiting",
	"courier_outbox_in_flight", "courier_outbox_contract",
}

// identityCond is an index condition that fixes a notification id on the
// identity's unique index (notification_id, endpoint): the rows it reads
// are one notification's deliveries, one per endpoint, however many the
// outbox holds, and sorting them costs what reading them does. The plan
// outbox_list_by_notification is written for, generic or custom; a
// custom plan for a rare status may walk that status's index instead.
var identityCond = regexp.MustCompile(`^\((\w+\.)?notification_id = [^()]*\)$`)

// walkCond is an index condition that bounds an index's walk by the id
// alone, from a cursor on or down: the walk passes every row on that side.
var walkCond = regexp.MustCompile(`^\((\w+\.)?id [<>]=? [^()]*\)$`)

// readsBeyond returns the whole reads of a table that grows with the
// traffic that plan makes and than does not: a sequential scan of it, a
// walk of one of its indexes (no condition, or only a bound on the id),
// or a sort of what it read. A walk of an index that reads the index
// alone (Index Only Scan) reads no more than a sequential scan of its
// table does: a statement that reads a whole table by design
// (endpoint_ref_deliveries) may do either, as the table's visibility map
// makes one or the other the cheaper.
func readsBeyond(plan, than string) []string {
	mine, theirs := wholeReads(plan), wholeReads(than)
	var extra []string
	for r, read := range mine {
		_, same := theirs[r]
		_, scanned := theirs["Seq Scan on "+read.table]
		if !same && !(read.indexOnly && scanned) {
			extra = append(extra, r)
		}
	}
	slices.Sort(extra)
	return extra
}

// wholeRead is a whole read of a table (see readsBeyond): which, and
// whether it is a walk of an index that reads the index alone.
type wholeRead struct {
	table     string
	indexOnly bool
}

// wholeReads returns the whole reads of a table that grows with the
// traffic that plan makes (see readsBeyond), each with its table.
func wholeReads(plan string) map[string]wholeRead {
	out := make(map[string]wholeRead)
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		m := growingScan.FindStringSubmatch(l)
		if m == nil || slices.Contains(unfinishedIndexes, m[2]) {
			continue
		}
		if m[1] == "Seq Scan" {
			if sortedAbove(lines, i) {
				out["Sort of "+m[3]] = wholeRead{table: m[3]}
			}
			out["Seq Scan on "+m[3]] = wholeRead{table: m[3]}
			continue
		}
		cond := ""
		for _, d := range lines[i+1:] {
			if strings.Contains(d, "(cost=") {
				break
			}
			if _, c, ok := strings.Cut(d, "Index Cond: "); ok {
				cond = c
			}
		}
		if sortedAbove(lines, i) && !identityCond.MatchString(cond) {
			out["Sort of "+m[3]] = wholeRead{table: m[3]}
		}
		if cond == "" || walkCond.MatchString(cond) {
			out["walk of "+m[2]] = wholeRead{table: m[3], indexOnly: m[1] == "Index Only Scan"}
		}
	}
	return out
}

// sortedAbove reports whether the plan node on line i is read by a Sort
// (or an Incremental Sort), through the nodes that pass its rows on as
// they come (Result, LockRows).
func sortedAbove(lines []string, i int) bool {
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ->")) }
	at := indent(lines[i])
	for j := i - 1; j >= 0; j-- {
		if !strings.Contains(lines[j], "(cost=") || indent(lines[j]) >= at {
			continue
		}
		node := strings.TrimLeft(lines[j], " ->")
		if strings.HasPrefix(node, "Result  (") || strings.HasPrefix(node, "LockRows  (") {
			at = indent(lines[j])
			continue
		}
		return strings.Contains(node, "Sort  (cost=")
	}
	return false
}
