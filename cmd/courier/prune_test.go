package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// TestPrune: courier prune deletes, in each table, what is past its age
// and nothing else: a succeeded delivery and the attempts log, but never
// a failed delivery, which waits for an operator; inbox records past
// their own age; replay pairs, and their counts, once expired. It says
// how many rows went from each table.
func TestPrune(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := t.Context()
	enqueue(t, s, "done", "https://r.example/hooks")
	enqueue(t, s, "broken", "https://r.example/hooks")
	p := protocol.For(s)
	claimed, err := p.Claim(ctx, protocol.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	var failed int64
	for _, c := range claimed {
		oc := protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded}
		if c.NotificationID == "broken" {
			oc = protocol.Outcome{Lease: c.Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: 400}
			failed = c.DeliveryID
		}
		if _, err := p.Settle(ctx, oc); err != nil {
			t.Fatal(err)
		}
	}
	// The inbox record is a day and a minute old: the inbox keeps records
	// at least a day.
	aged, err := sqlite.Open(ctx, db, store.Config{Now: func() time.Time { return time.Now().Add(-24*time.Hour - time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	defer aged.Close()
	tx, err := aged.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := protocol.InboxKey{Sender: "sender", Key: "n-1", PayloadSHA256: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}
	if _, err := protocol.InboxFor(aged).RecordCompleted(ctx, tx, key, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, nonce := range []string{"spent", "live"} {
		expires := time.Now().Add(-time.Hour) // past, and past the cache's margin
		if nonce == "live" {
			expires = time.Now().Add(time.Hour)
		}
		if _, err := s.Replay.Remember(ctx, "key-1", nonce, expires); err != nil {
			t.Fatal(err)
		}
	}

	if out := mustRun(t, exitOK, "prune", "-db", db); out != "outbox: 0\nattempts: 0\ninbox: 0\nreplay: 2\n" {
		t.Fatalf("prune with the default ages printed %q, want only the expired replay pair and its minute's count gone", out)
	}
	if out := mustRun(t, exitOK, "prune", "-db", db, "-older-than", "1us", "-inbox-older-than", "24h"); out != "outbox: 1\nattempts: 2\ninbox: 1\nreplay: 0\n" {
		t.Fatalf("prune of everything finished printed %q, want the succeeded delivery, both attempts and the inbox record", out)
	}
	if d, err := s.Outbox.Get(ctx, failed); err != nil || d.Status != courier.StatusFailed {
		t.Fatalf("the failed delivery after prune: %+v, %v; want it kept for an operator", d, err)
	}
	for _, args := range [][]string{{"-older-than", "-1h"}, {"-inbox-older-than", "-1s"}, {"-older-than", "0s"}, {"-inbox-older-than", "0"}, {"-inbox-older-than", "23h59m"}, {"-max-rows", "-1"}} {
		if code, _, _ := courierRun(t, append([]string{"prune", "-db", db}, args...)...); code != exitUsage {
			t.Errorf("prune %v exited %d, want %d", args, code, exitUsage)
		}
	}
}

// TestCommandsRefuseAStrayWord: the flag package stops at the first word
// that is not a flag, so the flags after it went unread: a prune given
// "-older-than 720h days -inbox-older-than 2160h" pruned the inbox at its
// default age and exited 0, and a deliveries list given "stray -status
// failed" listed every status. A command refuses a word beyond those it
// takes (none for most, a delivery id or an endpoint for some actions), as
// a usage error that names it, and does nothing.
func TestCommandsRefuseAStrayWord(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	url := "https://r.example/hooks"
	enqueue(t, s, "n-1", url)
	for _, tc := range []struct {
		args []string
		word string
	}{
		{[]string{"prune", "-db", db, "-older-than", "720h", "days", "-inbox-older-than", "2160h"}, "days"},
		{[]string{"health", "-db", db, "stray"}, "stray"},
		{[]string{"migrate", "-db", db, "stray"}, "stray"},
		{[]string{"secret", "new", "stray"}, "stray"},
		{[]string{"send", "stray", "-url", url}, "stray"},
		{[]string{"verify", "stray", "-request", "captured.http"}, "stray"},
		{[]string{"deliveries", "list", "-db", db, "stray", "-status", "failed"}, "stray"},
		{[]string{"deliveries", "show", "-db", db, "1", "stray"}, "stray"},
		{[]string{"deliveries", "redrive", "-db", db, "1", "stray"}, "stray"},
		{[]string{"deliveries", "redrive", "-db", db, "1", "-max-attempts", "2"}, "-max-attempts"},
		{[]string{"deliveries", "cancel", "-db", db, "1", "stray"}, "stray"},
		{[]string{"endpoints", "list", "-db", db, "stray"}, "stray"},
		{[]string{"endpoints", "enable", "-db", db, url, "stray"}, "stray"},
		{[]string{"endpoints", "disable", "-db", db, url, "stray"}, "stray"},
		{[]string{"endpoints", "limit", "-db", db, url, "-rate", "50"}, "-rate"},
	} {
		code, out, errOut := courierRun(t, tc.args...)
		if want := "unexpected argument " + strconv.Quote(tc.word); code != exitUsage || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("courier %v: exit %d, stdout %q, stderr %q; want %d, nothing on stdout, and %s", tc.args, code, out, errOut, exitUsage, want)
		}
	}
	if d, err := s.Outbox.Get(t.Context(), 1); err != nil || d.Status != courier.StatusPending {
		t.Errorf("the delivery after the refused commands: %s, %v; want it pending still", d.Status, err)
	}
	if h, err := s.Endpoints.Get(t.Context(), url); err != nil || h.State != store.EndpointClosed || h.Limits != (store.Limits{}) {
		t.Errorf("the endpoint after the refused commands: %s, limits %+v, %v; want it closed without limits", h.State, h.Limits, err)
	}
}

// TestPruneInterruptedKeepsWhatItSaid: a prune interrupted (Ctrl-C
// cancels the command's context) while it waits for a table another
// transaction holds exits 1 naming that table, having printed the counts
// of the tables it finished, whose deletions stay, and deleted nothing of
// the table it was on; run again, it finishes the rest.
func TestPruneInterruptedKeepsWhatItSaid(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := couriertest.PostgresURL(t)
	mustRun(t, exitOK, "migrate", "-db", db)
	conn := testConn(t, postgres.DriverName, db)
	s, err := store.Open(ctx, conn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 3
	for i := range n {
		enqueue(t, s, "n-"+strconv.Itoa(i), "https://r.example/hooks")
	}
	p := protocol.For(s)
	claimed, err := p.Claim(ctx, protocol.ClaimParams{Owner: "test", Limit: n, Lease: time.Minute})
	if err != nil || len(claimed) != n {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	for _, c := range claimed {
		if _, err := p.Settle(ctx, protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded}); err != nil {
			t.Fatal(err)
		}
	}
	// Another transaction holds the attempts log, as a long report might.
	holder, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "LOCK TABLE courier_attempts IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	pruneCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	done := runInBackground(pruneCtx, "prune", "-db", db, "-older-than", "1us")
	awaitLockWait(t, conn, done) // the prune waits for the attempts log
	interrupt()
	r := <-done
	if r.code != exitFailed || r.out != "outbox: "+strconv.Itoa(n)+"\n" || !strings.Contains(r.errOut, "pruning attempts after 0 rows") || !strings.Contains(r.errOut, "context canceled") {
		t.Fatalf("the interrupted prune: exit %d, stdout %q, stderr %q; want %d, the outbox's count, and attempts interrupted", r.code, r.out, r.errOut, exitFailed)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	var deliveries, attempts int
	if err := conn.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM courier_outbox), (SELECT COUNT(*) FROM courier_attempts)").Scan(&deliveries, &attempts); err != nil {
		t.Fatal(err)
	}
	if deliveries != 0 || attempts != n {
		t.Fatalf("after the interrupted prune: %d deliveries, %d attempts; want 0 and %d", deliveries, attempts, n)
	}
	if out := mustRun(t, exitOK, "prune", "-db", db, "-older-than", "1us"); out != "outbox: 0\nattempts: "+strconv.Itoa(n)+"\ninbox: 0\nreplay: 0\n" {
		t.Fatalf("prune again: %q", out)
	}
}

// TestPruneTakesTheRecordsOfEndpointsTheBreakerDisabled: courier prune
// deletes the record of an endpoint its breaker disabled, once nothing is
// left to send to it, and keeps one an operator disabled. The breaker's
// DisableAfter is the workers', which -disable-after names: a record
// disabled after failing for less than it, as an operator's Disable of a
// failing endpoint is, stays.
func TestPruneTakesTheRecordsOfEndpointsTheBreakerDisabled(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := t.Context()
	const gone, failing, held = "https://gone.example/h", "https://failing.example/h", "https://held.example/h"
	now := time.Now().Add(-3 * time.Hour)
	w, err := sqlite.Open(ctx, db, store.Config{
		Now:     func() time.Time { return now },
		Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute, DisableAfter: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tx, err := w.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, url := range map[string]string{"g-1": gone, "f-1": failing} {
		if _, err := w.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: url, Payload: []byte(`{}`), MaxAttempts: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	p := protocol.For(w)
	settle := func(want int, failed protocol.Result) {
		t.Helper()
		claimed, err := p.Claim(ctx, protocol.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute})
		if err != nil || len(claimed) != want {
			t.Fatalf("claimed %d, %v; want %d", len(claimed), err, want)
		}
		for _, c := range claimed {
			oc := protocol.Outcome{Lease: c.Lease, Result: failed, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Minute}
			if c.Endpoint == gone {
				oc.Result = protocol.Failed
				oc.Code, oc.HTTPStatus = courier.CodeEndpointGone, 410
			}
			if _, err := p.Settle(ctx, oc); err != nil {
				t.Fatal(err)
			}
		}
	}
	settle(2, protocol.Retry) // gone answers 410; failing fails once, to retry, and opens
	if err := w.Endpoints.Disable(ctx, held); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	settle(1, protocol.Failed) // failing's probe fails too, two hours after its first failure: disabled
	state := func(url string) store.EndpointState {
		t.Helper()
		h, err := s.Endpoints.Get(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		return h.State
	}
	for _, url := range []string{gone, failing, held} {
		if got := state(url); got != store.EndpointDisabled {
			t.Fatalf("%s is %s, want disabled", url, got)
		}
	}
	// The default -disable-after, 72h, takes only the 410's record.
	if out := mustRun(t, exitOK, "prune", "-db", db, "-older-than", "30m"); out != "outbox: 1\nattempts: 3\ninbox: 0\nreplay: 0\n" {
		t.Fatalf("prune printed %q, want the gone endpoint's record and the 3 attempts deleted", out)
	}
	if got := state(gone); got != store.EndpointClosed {
		t.Fatalf("after prune the gone endpoint is %s, want closed (no record)", got)
	}
	if got := state(failing); got != store.EndpointDisabled {
		t.Fatalf("after prune with the default -disable-after the failing endpoint is %s, want disabled: it failed for 2h, less than 72h", got)
	}
	if out := mustRun(t, exitOK, "prune", "-db", db, "-older-than", "30m", "-disable-after", "1h"); out != "outbox: 1\nattempts: 0\ninbox: 0\nreplay: 0\n" {
		t.Fatalf("prune -disable-after 1h printed %q, want the failing endpoint's record deleted", out)
	}
	if got, want := []store.EndpointState{state(failing), state(held)}, []store.EndpointState{store.EndpointClosed, store.EndpointDisabled}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("after prune -disable-after 1h failing and held are %v, want %v", got, want)
	}
	if code, _, _ := courierRun(t, "prune", "-db", db, "-disable-after", "0s"); code != exitUsage {
		t.Errorf("prune -disable-after 0s exited %d, want %d", code, exitUsage)
	}
}
