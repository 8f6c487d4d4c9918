package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// Environment of TestTheToolBesideARunningApplication's child processes.
const (
	procRoleEnv = "COURIER_TEST_PROC_ROLE" // "tool", "redrive", "enqueuer" or "locker"
	procDBEnv   = "COURIER_TEST_PROC_DB"
	procURLEnv  = "COURIER_TEST_PROC_URL" // the enqueuer's endpoint
)

// procEnqueued is how many deliveries the second application process
// enqueues.
const procEnqueued = 100

// toolRounds is how many times the tool process runs its commands.
const toolRounds = 15

// toolCommands are the operator's commands the tool process runs against
// the application's file, each round.
var toolCommands = [][]string{
	{"health"},
	{"deliveries", "list", "-status", "pending"},
	{"endpoints", "list"},
	{"prune"},
	{"migrate"},
	{"keys"},
}

// TestTheToolBesideARunningApplication: the courier tool and a second
// application process use the application's SQLite file while it runs (a
// worker delivering to a receiver whose inbox is in the same file, and
// enqueues in a loop). The tool's every command succeeds, while the
// application's every enqueue does and its worker logs no failure; the
// deliveries the other process enqueued, which wake no worker here, are
// delivered at the worker's polls; every delivery is answered 200 once.
func TestTheToolBesideARunningApplication(t *testing.T) {
	switch os.Getenv(procRoleEnv) {
	case "tool":
		db := os.Getenv(procDBEnv)
		for range toolRounds {
			for _, c := range toolCommands {
				mustRun(t, exitOK, append(c, "-db", db)...)
			}
		}
		return
	case "locker":
		holdWriteLock(t, os.Getenv(procDBEnv))
		return
	case "redrive":
		mustRun(t, exitOK, "deliveries", "redrive", "-db", os.Getenv(procDBEnv), "-endpoint", os.Getenv(procURLEnv))
		return
	case "enqueuer":
		s, err := sqlite.Open(t.Context(), os.Getenv(procDBEnv), store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := range procEnqueued {
			enqueueTo(t, s, fmt.Sprintf("other-%d", i), os.Getenv(procURLEnv))
		}
		return
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a hang fails, it does not block
	defer cancel()
	db, s := migrated(t)

	keys, srv := appReceiver(t, s)
	var logged bytes.Buffer
	var logMu sync.Mutex
	w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer, Transport: srv.Guard().Transport(),
		PollInterval: 50 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(&lockedWriter{w: &logged, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()

	child := func(role string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), procRoleEnv+"="+role, procDBEnv+"="+db, procURLEnv+"="+srv.URL)
		return cmd
	}
	tool, enqueuer := child("tool"), child("enqueuer")
	var toolOut, enqOut bytes.Buffer
	tool.Stdout, tool.Stderr = &toolOut, &toolOut
	enqueuer.Stdout, enqueuer.Stderr = &enqOut, &enqOut
	if err := tool.Start(); err != nil {
		t.Fatal(err)
	}
	if err := enqueuer.Start(); err != nil {
		t.Fatal(err)
	}
	toolDone := make(chan error, 1)
	go func() { toolDone <- tool.Wait() }()

	// The application enqueues until the tool has run all its rounds.
	var mine atomic.Int64
	for running := true; running; {
		select {
		case err := <-toolDone:
			if err != nil {
				t.Fatalf("the tool beside the application: %v\n%s", err, toolOut.Bytes())
			}
			running = false
		default:
			enqueueTo(t, s, "mine-"+strconv.FormatInt(mine.Add(1), 10), srv.URL)
		}
	}
	if err := enqueuer.Wait(); err != nil {
		t.Fatalf("the second application process: %v\n%s", err, enqOut.Bytes())
	}

	want := int(mine.Load()) + procEnqueued
	for {
		h, err := s.Outbox.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Counts["succeeded"] == want {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d deliveries succeeded before the deadline: %+v", h.Counts["succeeded"], want, h.Counts)
		case <-time.After(20 * time.Millisecond): // a poll of the outcome, not a synchronization
		}
	}
	stopRun()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	st := srv.Stats()
	if st.Requests != want || st.ByStatus[http.StatusOK] != want {
		t.Errorf("the receiver had %d requests, %v by status, for %d deliveries: want each answered 200 once", st.Requests, st.ByStatus, want)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if logged.Len() > 0 {
		t.Errorf("the worker logged, beside the tool:\n%s", logged.Bytes())
	}
}

// procNote is the payload of TestTheToolBesideARunningApplication.
type procNote struct {
	ID string `json:"id" validate:"required"`
}

func (n procNote) DedupeKey() string { return n.ID }

// enqueueTo enqueues a delivery of id to url whose payload names it.
func enqueueTo(t *testing.T, s *store.Store, id, url string) {
	t.Helper()
	tx, err := s.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: id, Endpoint: url, Payload: []byte(`{"id":"` + id + `"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestWorkFromAnotherProcessIsDeliveredAtThePoll: a commit wakes the
// workers of its own process only. A delivery the tool redrives, and
// deliveries a second application process enqueues, reach the worker of
// an idle application (at its default PollInterval) at its next poll.
func TestWorkFromAnotherProcessIsDeliveredAtThePoll(t *testing.T) {
	if os.Getenv(procRoleEnv) != "" {
		TestTheToolBesideARunningApplication(t) // the same children
		return
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang fails, it does not block
	defer cancel()
	db, s := migrated(t)
	keys, srv := appReceiver(t, s)
	enqueueTo(t, s, "failed-1", srv.URL)
	failAll(t, s)

	w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	defer func() {
		stopRun()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	for _, step := range []struct {
		role      string
		succeeded int
	}{{"redrive", 1}, {"enqueuer", 1 + procEnqueued}} {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), procRoleEnv+"="+step.role, procDBEnv+"="+db, procURLEnv+"="+srv.URL)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s in another process: %v\n%s", step.role, err, out)
		}
		for {
			h, err := s.Outbox.Health(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if h.Counts["succeeded"] == step.succeeded {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("after %s in another process, %d deliveries succeeded before the deadline, want %d: %+v", step.role, h.Counts["succeeded"], step.succeeded, h.Counts)
			case <-time.After(20 * time.Millisecond): // a poll of the outcome, not a synchronization
			}
		}
	}
}

// holdWriteLock takes SQLite's write lock on db, as a sqlite3 shell's
// BEGIN IMMEDIATE does, says "locked" on stdout and holds it until stdin
// closes.
func holdWriteLock(t *testing.T, db string) {
	d, err := sqlx.Open("sqlite3", sqlite.DSN(db, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tx, err := d.BeginTxx(t.Context(), nil) // the DSN's transactions take the lock as they begin
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("UPDATE courier_schema SET version = version WHERE 0"); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// TestAWriteLockHeldByAnotherProcessPastTheBusyTimeout: while another
// process holds the write lock (a sqlite3 shell left in BEGIN IMMEDIATE),
// the application's writes wait for it 10 s, the busy timeout, and then
// fail with code database_unavailable: a receiver answers 503 with
// Retry-After (internal_error, as for any store failure), which its sender
// retries. Once the lock is let go, the
// same request is processed.
func TestAWriteLockHeldByAnotherProcessPastTheBusyTimeout(t *testing.T) {
	if os.Getenv(procRoleEnv) != "" {
		TestTheToolBesideARunningApplication(t) // the same children
		return
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang fails, it does not block
	defer cancel()
	db, s := migrated(t)
	keys, srv := appReceiver(t, s)

	locker := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	locker.Env = append(os.Environ(), procRoleEnv+"=locker", procDBEnv+"="+db)
	release, err := locker.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := locker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := locker.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("the other process said %q (%v), want locked", line, err)
	}

	body := []byte(`{"id":"n-1"}`)
	post := func() (*http.Response, []byte) {
		t.Helper()
		req := couriertest.NewRequest(srv.URL, "n-1", body, keys.Signer).WithContext(ctx)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	begun := make(chan error, 1)
	go func() { // the application's business transaction, meanwhile
		tx, err := s.Begin(ctx)
		if err == nil {
			tx.Rollback()
		}
		begun <- err
	}()
	resp, answer := post()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("with the write lock held elsewhere: %d (Retry-After %q) %s, want 503 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), answer)
	}
	if err := <-begun; courier.CodeOf(err) != courier.CodeDatabaseUnavailable {
		t.Fatalf("Begin with the write lock held elsewhere = %v, want code database_unavailable", err)
	}
	// The operator's migrate of a current schema needs no writer: it
	// waited for it the busy timeout and failed (database is locked),
	// as CI saw beside a running application that kept taking it.
	if out := mustRun(t, exitOK, "migrate", "-db", db); !strings.HasPrefix(out, "up to date: schema version ") {
		t.Errorf("courier migrate of a current schema with the write lock held elsewhere: %q, want up to date", out)
	}

	release.Close()
	if err := locker.Wait(); err != nil {
		t.Fatalf("the other process: %v", err)
	}
	if resp, answer := post(); resp.StatusCode != http.StatusOK {
		t.Fatalf("once the lock was let go: %d %s, want 200", resp.StatusCode, answer)
	}
}

// TestTheToolConfiguresItsConnectionsAsTheApplication: the tool's
// connections to a SQLite file, its pool's and its writer's, are in WAL
// mode with foreign keys on and full durability, and its pool waits for
// the write lock the busy timeout, as the application's do: the tool
// runs beside the application on the same file.
func TestTheToolConfiguresItsConnectionsAsTheApplication(t *testing.T) {
	t.Parallel()
	db, _ := migrated(t)
	s, done, err := openStore(t.Context(), db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	type settings struct {
		JournalMode string `db:"journal_mode"`
		ForeignKeys int    `db:"foreign_keys"`
		Synchronous int    `db:"synchronous"`
		BusyTimeout int    `db:"timeout"`
	}
	const q = `SELECT journal_mode, foreign_keys, synchronous, timeout
		FROM pragma_journal_mode, pragma_foreign_keys, pragma_synchronous, pragma_busy_timeout`
	var pool settings
	if err := s.DB().GetContext(t.Context(), &pool, q); err != nil {
		t.Fatal(err)
	}
	if want := (settings{"wal", 1, 2, 10000}); pool != want {
		t.Errorf("the tool's pool: %+v, want %+v", pool, want)
	}
	tx, err := s.Begin(t.Context()) // on the tool's writer
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var writer settings
	if err := tx.GetContext(t.Context(), &writer, q); err != nil {
		t.Fatal(err)
	}
	writer.BusyTimeout = 0 // the writer waits in steps of its own (see package store/sqlite)
	if want := (settings{"wal", 1, 2, 0}); writer != want {
		t.Errorf("the tool's writer: %+v, want %+v", writer, want)
	}
}

// appReceiver serves the application's receiver of notes on s over
// loopback, closed when t ends, and returns the keys its sender signs
// with and its server.
func appReceiver(t *testing.T, s *store.Store) (couriertest.Keys, *couriertest.Server) {
	t.Helper()
	keys := couriertest.StandardWebhooksKeys("app")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier},
		func(context.Context, *sqlx.Tx, procNote) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, nil)
	t.Cleanup(srv.Close)
	return keys, srv
}
