package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/tablerows"
	"github.com/courier-go/courier/store"
)

// rows returns every row of every table of s's database, each table's in
// the order it is stored in (rowid on SQLite, ctid on PostgreSQL), as
// text: what a dry run must leave as it was.
func rows(t *testing.T, s *store.Store) string {
	t.Helper()
	tables, order := "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", "rowid"
	if s.Engine() == "postgres" {
		tables, order = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name", "ctid"
	}
	var names []string
	if err := s.DB().SelectContext(t.Context(), &names, tables); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, table := range names {
		tableRows(t, s, table, order, &b)
	}
	return b.String()
}

// tableRows writes every row of table, in order, to b.
func tableRows(t *testing.T, s *store.Store, table, order string, b *strings.Builder) {
	t.Helper()
	for _, row := range tablerows.Read(t, s, fmt.Sprintf("SELECT * FROM %q ORDER BY %s", table, order)) {
		fmt.Fprintf(b, "%s %v\n", table, row)
	}
}

// statuses returns the status of each delivery of s, by id.
func statuses(t *testing.T, s *store.Store) map[int64]courier.Status {
	t.Helper()
	page, err := s.Outbox.List(t.Context(), store.ListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[int64]courier.Status, len(page.Deliveries))
	for _, d := range page.Deliveries {
		m[d.ID] = d.Status
	}
	return m
}

// changed returns the ids whose status differs between before and after.
func changed(before, after map[int64]courier.Status) []int64 {
	var ids []int64
	for id, st := range after {
		if before[id] != st {
			ids = append(ids, id)
		}
	}
	return ids
}

// dryRunThenRun runs args with -dry-run (before their -db), wanting exit
// 0, dry on stdout and the database as it was; then args themselves,
// wanting exit 0 and real on stdout. It returns the ids of the deliveries
// the real run changed the status of.
func dryRunThenRun(t *testing.T, s *store.Store, args []string, dry, real string) []int64 {
	t.Helper()
	was, before := rows(t, s), statuses(t, s)
	at := slices.Index(args, "-db")
	dryArgs := slices.Concat(args[:at], []string{"-dry-run"}, args[at:])
	if code, out, errOut := courierRun(t, dryArgs...); code != exitOK || out != dry {
		t.Fatalf("courier %s: exit %d, stdout %q, stderr %q; want exit 0 and %q", strings.Join(dryArgs, " "), code, out, errOut, dry)
	}
	if now := rows(t, s); now != was {
		t.Fatalf("courier %s changed the database:\nbefore:\n%s\nafter:\n%s", strings.Join(dryArgs, " "), was, now)
	}
	if out := mustRun(t, exitOK, args...); out != real {
		t.Fatalf("courier %s: %q, want %q", strings.Join(args, " "), out, real)
	}
	return changed(before, statuses(t, s))
}

// TestRedriveDryRunCountsWhatTheRedriveMoves: deliveries redrive
// -dry-run, of an endpoint or of one delivery, prints "would redrive: n"
// and changes nothing; the redrive then moves those n, and no other. A
// delivery the redrive would leave fails the dry run, exit 1, saying why,
// as it fails the redrive; so does an endpoint the database does not
// know.
func TestRedriveDryRunCountsWhatTheRedriveMoves(t *testing.T) {
	t.Parallel()
	const hook, other = "https://r.example/hooks", "https://other.example/hooks"
	db, s := migrated(t)
	enqueue(t, s, "n-1", hook)
	enqueue(t, s, "n-2", hook)
	enqueue(t, s, "n-3", other)
	failAll(t, s)
	enqueue(t, s, "n-4", hook) // pending: no redrive takes it

	moved := dryRunThenRun(t, s, []string{"deliveries", "redrive", "-db", db, "-endpoint", hook}, "would redrive: 2\n", "redriven: 2\n")
	if len(moved) != 2 || statuses(t, s)[1] != courier.StatusPending || statuses(t, s)[2] != courier.StatusPending {
		t.Errorf("the redrive changed deliveries %v, want 1 and 2 pending", moved)
	}
	moved = dryRunThenRun(t, s, []string{"deliveries", "redrive", "-db", db, "3"}, "would redrive: 1\n", "redriven: 1\n")
	if len(moved) != 1 || moved[0] != 3 {
		t.Errorf("the redrive of 3 changed deliveries %v", moved)
	}
	moved = dryRunThenRun(t, s, []string{"deliveries", "redrive", "-db", db, "-endpoint-ref", endpoint.Ref(hook)}, "would redrive: 0\n", "redriven: 0\n")
	if len(moved) != 0 {
		t.Errorf("a redrive of nothing failed changed deliveries %v", moved)
	}

	refusedAlike(t, s, []string{"deliveries", "redrive", "-db", db}, map[string]string{
		"4":                                "delivery 4 is pending, not failed",
		"99":                               "delivery 99 not found",
		"-endpoint=https://r.example/hook": "no endpoint the database knows",
	})
}

// refusedAlike runs action (its words and -db) with each argument of
// refusals, with -dry-run and without, wanting both to exit 1 with
// nothing on stdout and stderr saying what refusals has for it, and the
// database as it was.
func refusedAlike(t *testing.T, s *store.Store, action []string, refusals map[string]string) {
	t.Helper()
	was := rows(t, s)
	for arg, says := range refusals {
		for _, dry := range []bool{true, false} {
			args := append([]string(nil), action...)
			if dry {
				args = append(args, "-dry-run")
			}
			args = append(args, arg)
			code, out, errOut := courierRun(t, args...)
			if code != exitFailed || out != "" || !strings.Contains(errOut, says) {
				t.Errorf("courier %s: exit %d, stdout %q, stderr %q; want %d saying %q", strings.Join(args, " "), code, out, errOut, exitFailed, says)
			}
		}
	}
	if now := rows(t, s); now != was {
		t.Fatalf("the refused %s changed the database:\nbefore:\n%s\nafter:\n%s", strings.Join(action[:2], " "), was, now)
	}
}

// TestCancelDryRunCountsWhatTheCancelTakes: deliveries cancel -dry-run,
// of an endpoint or of one delivery, prints "would cancel: n" and
// changes nothing; the cancel then cancels those n, and no other. A
// delivery the cancel would not take fails the dry run, exit 1, saying
// why, as it fails the cancel; so does an endpoint the database does not
// know.
func TestCancelDryRunCountsWhatTheCancelTakes(t *testing.T) {
	t.Parallel()
	const gone, other = "https://gone.example/hooks", "https://other.example/hooks"
	db, s := migrated(t)
	enqueue(t, s, "n-1", gone)
	failAll(t, s)
	enqueue(t, s, "n-2", gone)
	enqueue(t, s, "n-3", gone)
	enqueue(t, s, "n-4", other)

	cancelled := dryRunThenRun(t, s, []string{"deliveries", "cancel", "-db", db, "-endpoint", gone}, "would cancel: 3\n", "cancelled: 3\n")
	if len(cancelled) != 3 || statuses(t, s)[4] != courier.StatusPending {
		t.Errorf("the cancel changed deliveries %v, want 1, 2 and 3 and not 4", cancelled)
	}
	cancelled = dryRunThenRun(t, s, []string{"deliveries", "cancel", "-db", db, "4"}, "would cancel: 1\n", "cancelled: 1\n")
	if len(cancelled) != 1 || cancelled[0] != 4 {
		t.Errorf("the cancel of 4 changed deliveries %v", cancelled)
	}

	refusedAlike(t, s, []string{"deliveries", "cancel", "-db", db}, map[string]string{
		"4":                                   "delivery 4 is suppressed: only a pending",
		"99":                                  "delivery 99 not found",
		"-endpoint=https://gone.example/hook": "no endpoint the database knows",
	})
}

// TestDisableDryRunSaysWhatTheDisableDoes: endpoints disable -dry-run
// prints "would disable: <endpoint>", or "already disabled", and changes
// nothing; of a URL the database does not know it says on stderr that it
// would be disabled ahead of its deliveries, and writes no record.
func TestDisableDryRunSaysWhatTheDisableDoes(t *testing.T) {
	t.Parallel()
	const hook, typo = "https://hooks.chat.example/services/T1/AAAA", "https://hooks.chat.example/services/T1/AAAB"
	db, s := migrated(t)
	enqueue(t, s, "n-1", hook)
	named := "https://hooks.chat.example/… (ref " + endpoint.Ref(hook) + ")"
	dryRunThenRun(t, s, []string{"endpoints", "disable", "-db", db, hook}, "would disable: "+named+"\n", "disabled: "+named+"\n")
	if h, err := s.Endpoints.Get(t.Context(), hook); err != nil || h.State != store.EndpointDisabled {
		t.Fatalf("%s after the disable: %s, %v; want disabled", hook, h.State, err)
	}
	dryRunThenRun(t, s, []string{"endpoints", "disable", "-db", db, endpoint.Ref(hook)}, "already disabled: "+named+"\n", "already disabled: "+named+"\n")

	was := rows(t, s)
	code, out, errOut := courierRun(t, "endpoints", "disable", "-dry-run", "-db", db, typo)
	if want := "would disable: https://hooks.chat.example/… (ref " + endpoint.Ref(typo) + ")\n"; code != exitOK || out != want ||
		!strings.Contains(errOut, "no endpoint the database knows") || !strings.Contains(errOut, "would be disabled ahead of its deliveries") {
		t.Errorf("disable -dry-run of a URL the database does not know: exit %d, %q, stderr %q; want 0, %q and a warning", code, out, errOut, want)
	}
	if now := rows(t, s); now != was {
		t.Fatalf("disable -dry-run of a URL the database does not know changed the database:\nbefore:\n%s\nafter:\n%s", was, now)
	}
}

// enqueueCommand enqueues command request to url under the capabilities
// digest digest.
func enqueueCommand(t *testing.T, s *store.Store, url, request, digest string) {
	t.Helper()
	c, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: request, SourceMaxAttempts: 5, CapabilitiesSHA256: digest, Body: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := c.Payload()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.EnqueueCommand(t.Context(), s.DB(), store.CommandParams{Endpoint: url, Payload: payload}); err != nil {
		t.Fatal(err)
	}
}

// TestFailMismatchedDryRunCountsWhatTheRunFails: contracts
// fail-mismatched -dry-run prints "would fail: n", the commands held back
// by the pin, and changes nothing; the run then fails those n. With one
// of them leased, which the run leaves to settle, the dry run counts it
// and says on stderr that the run fails fewer. An endpoint the database
// does not know fails it, exit 1, as it fails the run.
func TestFailMismatchedDryRunCountsWhatTheRunFails(t *testing.T) {
	t.Parallel()
	const source = "https://source.example/commands"
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	db, s := migrated(t)
	enqueueCommand(t, s, source, "r-1", a)
	enqueueCommand(t, s, source, "r-2", a)
	mustRun(t, exitOK, "contracts", "pin", "-db", db, source, b)

	failed := dryRunThenRun(t, s, []string{"contracts", "fail-mismatched", "-db", db, source}, "would fail: 2\n", "failed: 2\n")
	if len(failed) != 2 {
		t.Errorf("fail-mismatched changed deliveries %v, want 2", failed)
	}
	dryRunThenRun(t, s, []string{"contracts", "fail-mismatched", "-db", db, endpoint.Ref(source)}, "would fail: 0\n", "failed: 0\n")

	// A leased one is counted, and said.
	mustRun(t, exitOK, "contracts", "pin", "-db", db, source, a)
	enqueueCommand(t, s, source, "r-3", a)
	enqueueCommand(t, s, source, "r-4", a)
	if _, err := protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "test", Limit: 1, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, exitOK, "contracts", "pin", "-db", db, source, b)
	was := rows(t, s)
	code, out, errOut := courierRun(t, "contracts", "fail-mismatched", "-dry-run", "-db", db, source)
	if code != exitOK || out != "would fail: 2\n" || !strings.Contains(errOut, "1 of https://source.example/… (ref "+endpoint.Ref(source)+")'s commands are leased") {
		t.Errorf("fail-mismatched -dry-run with a command leased: exit %d, %q, stderr %q; want 0, would fail: 2 and a word on the leased one", code, out, errOut)
	}
	if now := rows(t, s); now != was {
		t.Fatalf("fail-mismatched -dry-run changed the database:\nbefore:\n%s\nafter:\n%s", was, now)
	}
	if out := mustRun(t, exitOK, "contracts", "fail-mismatched", "-db", db, source); out != "failed: 1\n" {
		t.Errorf("fail-mismatched with a command leased: %q, want failed: 1", out)
	}

	refusedAlike(t, s, []string{"contracts", "fail-mismatched", "-db", db}, map[string]string{
		"https://source.example/command": "no endpoint the database knows",
	})
}

// TestPruneDryRunCountsWhatThePruneDeletes: prune -dry-run prints, for
// each of the four prunes, "would prune <table>: n", and changes no row
// of any table, on either engine; the prune then deletes those n, and
// the rows it keeps stay. With -max-rows it prints the bounded number the
// prune then deletes, and says on stderr of each prune that more are past
// their age.
func TestPruneDryRunCountsWhatThePruneDeletes(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			const hook, down = "https://r.example/hooks", "https://down.example/hooks"
			db, open := e.db(t)
			s := open(store.Config{})
			// Eight days ago, past the week prune keeps by default: two
			// deliveries that succeeded, one cancelled, one that failed
			// (kept, its endpoint's breaker record not), and two inbox
			// records.
			aged := open(store.Config{Now: func() time.Time { return time.Now().Add(-8 * 24 * time.Hour) }})
			enqueue(t, aged, "done-1", hook)
			enqueue(t, aged, "done-2", hook)
			if n := deliver(t, aged); n != 2 {
				t.Fatalf("delivered %d, want 2", n)
			}
			enqueue(t, aged, "broken", down)
			failAll(t, aged)
			enqueue(t, aged, "withdrawn", hook)
			if err := aged.Outbox.Cancel(ctx, 4); err != nil {
				t.Fatal(err)
			}
			record := func(s *store.Store, key string) {
				t.Helper()
				tx, err := s.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				k := protocol.InboxKey{Sender: "sender", Key: key, PayloadSHA256: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}
				if _, err := protocol.InboxFor(s).RecordCompleted(ctx, tx, k, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			record(aged, "n-1")
			record(aged, "n-2")
			// Now: a delivery waiting, an inbox record, two spent replay
			// pairs (and their minute's count) and a live one.
			enqueue(t, s, "waiting", hook)
			record(s, "n-3")
			for nonce, expires := range map[string]time.Time{"spent-1": time.Now().Add(-time.Hour), "spent-2": time.Now().Add(-time.Hour), "live": time.Now().Add(time.Hour)} {
				if _, err := s.Replay.Remember(ctx, "key-1", nonce, expires); err != nil {
					t.Fatal(err)
				}
			}

			bounded := "would prune outbox: 1\nwould prune attempts: 1\nwould prune inbox: 1\nwould prune replay: 1\n"
			code, out, errOut := courierRun(t, "prune", "-dry-run", "-db", db, "-max-rows", "1")
			if code != exitOK || out != bounded {
				t.Errorf("prune -dry-run -max-rows 1: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, bounded)
			}
			for _, says := range []string{"4 rows of outbox are past their age: -max-rows stops the prune at 1", "3 rows of attempts", "2 rows of inbox", "3 rows of replay"} {
				if !strings.Contains(errOut, says) {
					t.Errorf("prune -dry-run -max-rows 1: stderr %q; want it saying %q", errOut, says)
				}
			}
			dryRunThenRun(t, s, []string{"prune", "-db", db, "-max-rows", "1"}, bounded, "outbox: 1\nattempts: 1\ninbox: 1\nreplay: 1\n")
			dryRunThenRun(t, s, []string{"prune", "-db", db},
				"would prune outbox: 3\nwould prune attempts: 2\nwould prune inbox: 1\nwould prune replay: 2\n", "outbox: 3\nattempts: 2\ninbox: 1\nreplay: 2\n")
			dryRunThenRun(t, s, []string{"prune", "-db", db},
				"would prune outbox: 0\nwould prune attempts: 0\nwould prune inbox: 0\nwould prune replay: 0\n", "outbox: 0\nattempts: 0\ninbox: 0\nreplay: 0\n")
			if got := statuses(t, s); len(got) != 2 || got[3] != courier.StatusFailed || got[5] != courier.StatusPending {
				t.Errorf("the deliveries after the prunes: %v, want the failed 3 and the waiting 5", got)
			}
		})
	}
}

// TestDryRunIsInTheHelpOfEachDestructiveAction: the help of each action
// that has a dry run names -dry-run, and says what it counts.
func TestDryRunIsInTheHelpOfEachDestructiveAction(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"deliveries", "redrive"}, {"deliveries", "cancel"}, {"endpoints", "disable"}, {"contracts", "fail-mismatched"}, {"prune"},
	} {
		code, _, errOut := courierRun(t, append(args, "-h")...)
		if code != exitOK || !strings.Contains(errOut, "\n  -dry-run") || !strings.Contains(errOut, "change nothing") {
			t.Errorf("courier %s -h: exit %d, help:\n%s\nwant -dry-run in it", strings.Join(args, " "), code, errOut)
		}
	}
}
