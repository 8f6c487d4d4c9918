package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/commandresponse"
	"github.com/courier-go/courier/internal/wire"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

var sourceCapabilities = strings.Repeat("5", 64)

// enqueueCommand enqueues a command for the bundle's server at /source.
func (b *workerBundle) enqueueCommand(t *testing.T, op, requestID string, sourceMax int) int64 {
	t.Helper()
	body := `{"title":"` + requestID + `"}`
	if op != ack.OperationChange {
		body = "null"
	}
	c, err := ack.NewCommand(ack.Command{Operation: op, RequestID: requestID, SourceMaxAttempts: sourceMax, CapabilitiesSHA256: sourceCapabilities, Body: json.RawMessage(body)})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := c.Payload()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := b.store.DB().BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	e, err := b.store.Outbox.EnqueueCommand(t.Context(), tx, store.CommandParams{Endpoint: b.server.URL + "/source", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// TestWorkerVerifiesCommandResponse: a response that misstates any bound
// field fails the delivery with ack_invalid, without a retry.
func TestWorkerVerifiesCommandResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(r *ack.CommandResponse) []byte
		want courier.Status
	}{
		{"exact", func(r *ack.CommandResponse) []byte { return commandresponse.Bytes(*r) }, courier.StatusSucceeded},
		{"operation", func(r *ack.CommandResponse) []byte {
			r.Operation = ack.OperationCancellation
			return commandresponse.Bytes(*r)
		}, courier.StatusFailed},
		{"request_id", func(r *ack.CommandResponse) []byte { r.RequestID = "other"; return commandresponse.Bytes(*r) }, courier.StatusFailed},
		{"payload digest", func(r *ack.CommandResponse) []byte {
			r.PayloadSHA256 = ack.Digest(nil)
			return commandresponse.Bytes(*r)
		}, courier.StatusFailed},
		{"capabilities digest", func(r *ack.CommandResponse) []byte {
			r.CapabilitiesSHA256 = strings.Repeat("6", 64)
			return commandresponse.Bytes(*r)
		}, courier.StatusFailed},
		{"source budget", func(r *ack.CommandResponse) []byte { r.SourceMaxAttempts++; return commandresponse.Bytes(*r) }, courier.StatusFailed},
		{"attempt beyond the budget", func(r *ack.CommandResponse) []byte {
			r.Attempt = r.SourceMaxAttempts + 1
			return commandresponse.Bytes(*r)
		}, courier.StatusFailed},
		// Informational: Courier-Attempt is not signed, so the response's
		// attempt may be a replay's, within the budget.
		{"another attempt than the one sent", func(r *ack.CommandResponse) []byte { r.Attempt++; return commandresponse.Bytes(*r) }, courier.StatusSucceeded},
		{"status", func(r *ack.CommandResponse) []byte { r.Status = "accepted"; return commandresponse.Bytes(*r) }, courier.StatusFailed},
		{"unknown field", func(r *ack.CommandResponse) []byte {
			return []byte(strings.Replace(string(commandresponse.Bytes(*r)), "{", `{"note":"x",`, 1))
		}, courier.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b *workerBundle
			b = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if _, err := b.verifier.Verify(r.Context(), r, body); err != nil {
					http.Error(w, "bad signature", http.StatusUnauthorized)
					return
				}
				var c ack.Command
				attempt, ok := wire.ParseAttempt(r.Header.Get(ack.AttemptHeader))
				if err := json.Unmarshal(body, &c); err != nil || !ok {
					http.Error(w, "bad command", http.StatusBadRequest)
					return
				}
				resp := commandresponse.For(c, body, attempt, ack.CommandApplied)
				w.Header().Set("Content-Type", "application/json")
				w.Write(tt.edit(&resp))
			}, nil)
			id := b.enqueueCommand(t, ack.OperationChange, "r-1", 3)
			e := b.work(t)
			d := b.get(t, id)
			if d.Status != tt.want || e.Status != tt.want {
				t.Fatalf("status %s (event %s), want %s", d.Status, e.Status, tt.want)
			}
			if tt.want == courier.StatusFailed && (d.LastErrorCode != courier.CodeAckInvalid || d.Attempts != 1) {
				t.Fatalf("failed with %s after %d attempts, want ack_invalid after 1", d.LastErrorCode, d.Attempts)
			}
			b.clock.Advance(24 * time.Hour)
			if n, err := b.worker.Work(t.Context()); n != 0 || err != nil {
				t.Fatalf("Work after settling = %d, %v", n, err)
			}
		})
	}
}

// faults wraps a handler: each command's first request is answered 503,
// its second is processed (and committed) and then its connection is
// dropped before any answer; later ones pass through.
type faults struct {
	next http.Handler
	mu   sync.Mutex
	seen map[string]int
}

func (f *faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen[r.Header.Get("webhook-id")]++
	n := f.seen[r.Header.Get("webhook-id")]
	f.mu.Unlock()
	switch n {
	case 1:
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	case 2:
		rec := httptest.NewRecorder()
		f.next.ServeHTTP(rec, r)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Close()
	default:
		f.next.ServeHTTP(w, r)
	}
}

// TestCommandsEndToEnd delivers commands from a worker to a Source through
// faults: every command is applied exactly once and every delivery
// succeeds with a response the worker verified.
func TestCommandsEndToEnd(t *testing.T) {
	t.Parallel()
	var source atomic.Pointer[handler.Source]
	f := &faults{seen: make(map[string]int), next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { source.Load().ServeHTTP(w, r) })}
	b := setupWorker(t, f.ServeHTTP, nil)

	inbox, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "source.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inbox.Close() })
	if _, err := inbox.DB().ExecContext(t.Context(), "CREATE TABLE applied (key TEXT PRIMARY KEY, removal INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	var applications atomic.Int64
	s, err := handler.NewSource(handler.SourceConfig{Store: inbox, Verifier: b.verifier, CapabilitiesSHA256: sourceCapabilities},
		func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
			applications.Add(1)
			_, err := tx.ExecContext(ctx, "INSERT INTO applied (key, removal) VALUES (?, ?)", c.DedupeKey(), c.Operation != ack.OperationChange)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	source.Store(s)

	var ids []int64
	for i, op := range []string{ack.OperationChange, ack.OperationTombstone, ack.OperationChange, ack.OperationCancellation} {
		ids = append(ids, b.enqueueCommand(t, op, "req-"+string(rune('a'+i)), 5))
	}
	for round := 0; round < 10; round++ {
		if _, err := b.worker.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Minute)
	}
	for _, id := range ids {
		d := b.get(t, id)
		if d.Status != courier.StatusSucceeded || d.Attempts != 3 || d.AckSHA256 == "" {
			t.Fatalf("delivery %s is %s/%s after %d attempts, want succeeded at the third", d.NotificationID, d.Status, d.LastErrorCode, d.Attempts)
		}
	}
	var rows int
	if err := inbox.DB().GetContext(t.Context(), &rows, "SELECT COUNT(*) FROM applied"); err != nil {
		t.Fatal(err)
	}
	if rows != len(ids) || applications.Load() != int64(len(ids)) {
		t.Fatalf("applied %d rows in %d applications, want each of %d commands once", rows, applications.Load(), len(ids))
	}
}

// TestReplayWithAHigherAttemptDoesNotFailTheGenuineOne is the finding
// "Courier-Attempt is unsigned and the source binds its stored answer to
// it": a replay of the genuine request with Courier-Attempt: 3 reaches the
// source first and is applied; the genuine attempt 1 then gets the stored
// response naming attempt 3, and succeeds, the command applied once.
func TestReplayWithAHigherAttemptDoesNotFailTheGenuineOne(t *testing.T) {
	t.Parallel()
	var source atomic.Pointer[handler.Source]
	answers := make(chan string, 1)
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		replay := r.Clone(r.Context())
		replay.Header.Set(ack.AttemptHeader, "3")
		replay.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		source.Load().ServeHTTP(rec, replay)
		if rec.Code != http.StatusOK {
			t.Errorf("the replay was answered %d: %s", rec.Code, rec.Body)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		genuine := httptest.NewRecorder()
		source.Load().ServeHTTP(genuine, r)
		answers <- genuine.Body.String()
		for k, v := range genuine.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(genuine.Code)
		w.Write(genuine.Body.Bytes())
	}, nil)
	applications := countingSource(t, b, &source)

	id := b.enqueueCommand(t, ack.OperationChange, "req-replayed", 5)
	e := b.work(t)
	if d := b.get(t, id); d.Status != courier.StatusSucceeded || d.Attempts != 1 || e.Status != courier.StatusSucceeded {
		t.Fatalf("delivery %s/%s after %d attempts, want succeeded at the first", d.Status, d.LastErrorCode, d.Attempts)
	}
	if got := <-answers; !strings.Contains(got, `"attempt":3`) {
		t.Fatalf("the genuine attempt was not answered with the replay's stored response: %s", got)
	}
	if applications.Load() != 1 {
		t.Fatalf("applied %d times, want once", applications.Load())
	}
}

// TestACommandsAttemptCutShortByAStopIsNotHeldAgainstItsSource: a command
// whose source allows one attempt (source_max_attempts 1), its attempt cut
// short as the worker stops (a deploy), is applied by the next attempt:
// the stop spares the delivery's budget, and the next attempt's
// Courier-Attempt counts the one cut short out, so the source does not
// refuse it as one beyond its budget (source_attempts_exhausted).
func TestACommandsAttemptCutShortByAStopIsNotHeldAgainstItsSource(t *testing.T) {
	t.Parallel()
	var source atomic.Pointer[handler.Source]
	arrived := make(chan string, 10)
	var held atomic.Bool
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get(ack.AttemptHeader)
		if held.CompareAndSwap(false, true) {
			io.Copy(io.Discard, r.Body) // read whole, so that the server sees the request end
			<-r.Context().Done()        // the first attempt is held until the worker cuts it short
			return
		}
		source.Load().ServeHTTP(w, r)
	}, nil)
	applications := countingSource(t, b, &source)
	id := b.enqueueCommand(t, ack.OperationChange, "req-stopped", 1)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- b.worker.Run(ctx) }()
	if got := <-arrived; got != "1" {
		t.Fatalf("the first attempt sent Courier-Attempt %q, want 1", got)
	}
	cancel() // Run's context ends: the attempt in flight is cut short
	if err := <-runErr; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if d := b.get(t, id); d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeWorkerStopped || d.Attempts != 1 || d.MaxAttempts != 2 {
		t.Fatalf("after its attempt was cut short the command is %s/%s after %d of %d attempts, want retry_wait/worker_stopped after 1 of 2",
			d.Status, d.LastErrorCode, d.Attempts, d.MaxAttempts)
	}

	if n, err := b.worker.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want the command", n, err)
	}
	if got := <-arrived; got != "1" {
		t.Fatalf("the attempt after the stop sent Courier-Attempt %q, want 1: the one cut short spent no budget", got)
	}
	if d := b.get(t, id); d.Status != courier.StatusSucceeded || d.Attempts != 2 || d.LastRemoteCode != "" {
		t.Fatalf("the command is %s/%s (remote %q) after %d attempts, want succeeded after 2", d.Status, d.LastErrorCode, d.LastRemoteCode, d.Attempts)
	}
	if n := applications.Load(); n != 1 {
		t.Fatalf("the source applied the command %d times, want once", n)
	}
}

// countingSource puts into source a Source on a SQLite file of its own,
// verifying with b's verifier, whose function applies nothing and counts
// its calls.
func countingSource(t *testing.T, b *workerBundle, source *atomic.Pointer[handler.Source]) *atomic.Int64 {
	t.Helper()
	inbox, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "source.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inbox.Close() })
	applications := new(atomic.Int64)
	s, err := handler.NewSource(handler.SourceConfig{Store: inbox, Verifier: b.verifier, CapabilitiesSHA256: sourceCapabilities},
		func(context.Context, *sqlx.Tx, ack.Command) error {
			applications.Add(1)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	source.Store(s)
	return applications
}
