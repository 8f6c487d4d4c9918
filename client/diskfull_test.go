package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// fullDisks is a worker delivering a SQLite outbox to a deduping receiver
// with a SQLite inbox of its own, either of which the test fills: its
// writer may then grow the file by no page (PRAGMA max_page_count), as on
// a full disk, and SQLite answers SQLITE_FULL.
type fullDisks struct {
	outbox, inbox *store.Store
	worker        *client.Worker
	logs          *capture
	signer        signature.Signer
	endpoint      string
	events        chan client.Event
	hold          atomic.Pointer[chan struct{}] // when set, the receiver's answers wait for it to close before they are sent
	answered      chan string                   // an answer held by hold is ready
}

// paddedNote is what the full-disk tests' receiver accepts: a note,
// padded to need room of its own in the outbox.
type paddedNote struct {
	NotificationID string `json:"notification_id" validate:"required"`
	Pad            string `json:"pad"`
}

func (n paddedNote) DedupeKey() string { return n.NotificationID }

// filler is what the receiver's function writes beside each notification
// it applies: enough for every one to need pages of its own.
var filler = strings.Repeat("x", 8<<10)

func setupFullDisks(t *testing.T, tune func(*client.Config)) *fullDisks {
	t.Helper()
	ctx := t.Context()
	f := &fullDisks{logs: newCapture(t), events: make(chan client.Event, 1000), answered: make(chan string, 1000)}
	var err error
	if f.outbox, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.outbox.Close() })
	if f.inbox, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "inbox.db"), store.Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.inbox.Close() })
	if _, err := f.inbox.DB().ExecContext(ctx, `CREATE TABLE applied (id TEXT NOT NULL, filler TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	key, _ := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	f.signer, _ = signature.NewStandardWebhooksSigner(key)
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "sender", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: f.inbox, Verifier: verifier}, func(ctx context.Context, tx *sqlx.Tx, n paddedNote) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO applied (id, filler) VALUES (?, ?)`, n.NotificationID, filler)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, r)
		if hold := f.hold.Load(); hold != nil {
			f.answered <- r.Header.Get("webhook-id")
			<-*hold
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	f.endpoint = srv.URL + "/hooks"

	cfg := client.Config{Store: f.outbox, Signer: f.signer, PollInterval: 100 * time.Millisecond, // retries are claimed at a poll
		Transport: loopbackGuard(t, srv.URL).Transport(),
		Backoff:   func(int, time.Duration) time.Duration { return 50 * time.Millisecond },
		Logger:    slog.New(f.logs),
		Hook:      func(e client.Event) { f.events <- e },
	}
	if tune != nil {
		tune(&cfg)
	}
	if f.worker, err = client.NewWorker(cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs the worker until the test ends; Run must not return before.
func (f *fullDisks) run(t *testing.T) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f.worker.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.worker.Stop(ctx); err != nil {
			t.Errorf("Stop = %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// fill lets s's writer grow the file by no page from now on, as a full
// disk would, and takes the pages the file has free (a table of its own
// holds them): whatever needs a new page fails with SQLITE_FULL. empty
// lets the writer grow the file again.
func fill(t *testing.T, s *store.Store) {
	t.Helper()
	if _, err := s.DB().ExecContext(t.Context(), `CREATE TABLE IF NOT EXISTS spent (x BLOB)`); err != nil {
		t.Fatal(err)
	}
	maxPages(t, s, "")
	for {
		_, err := s.DB().ExecContext(t.Context(), `INSERT INTO spent (x) VALUES (zeroblob(2048))`)
		if err == nil {
			continue
		}
		if e := (sqlite3.Error{}); !errors.As(err, &e) || e.Code != sqlite3.ErrFull {
			t.Fatal(err)
		}
		return
	}
}

func empty(t *testing.T, s *store.Store) { t.Helper(); maxPages(t, s, "1073741823") }

// maxPages sets max_page_count on s's writer, the one connection every
// write of the Store's goes through (Begin's transactions are on it), and
// on its DB()'s one connection: n pages, or the file's size if n is "".
func maxPages(t *testing.T, s *store.Store, n string) {
	t.Helper()
	s.DB().SetMaxOpenConns(1)
	tx, err := s.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if n == "" {
		if err := tx.GetContext(t.Context(), &n, "SELECT page_count FROM pragma_page_count"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.ExecContext(t.Context(), "PRAGMA max_page_count = "+n); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(t.Context(), "PRAGMA max_page_count = "+n); err != nil {
		t.Fatal(err)
	}
}

// enqueue enqueues a notification in a transaction of the application's
// (Begin) and returns the error of the enqueue or of its commit.
func (f *fullDisks) enqueue(ctx context.Context, id string, pad int) error {
	tx, err := f.outbox.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	payload := fmt.Appendf(nil, `{"notification_id":%q,"pad":%q}`, id, strings.Repeat("p", pad))
	if _, err := f.outbox.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: f.endpoint, Payload: payload}); err != nil {
		return err
	}
	return tx.Commit()
}

// post sends a signed notification straight to the receiver.
func (f *fullDisks) post(t *testing.T, id string) (status int, retryAfter, code string) {
	t.Helper()
	body := fmt.Appendf(nil, `{"notification_id":%q}`, id)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := f.signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var problem struct {
		Code string `json:"code"`
	}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &problem)
	return resp.StatusCode, resp.Header.Get("Retry-After"), problem.Code
}

// await waits for the worker's event for id that ok accepts, skipping
// others.
func (f *fullDisks) await(t *testing.T, what string, ok func(client.Event) bool) client.Event {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-f.events:
			if ok(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("%s: no such event within 20s; logged: %+v", what, lastLines(f.logs.lines(""), 10))
		}
	}
}

// applied returns how many times the receiver applied each notification.
func (f *fullDisks) applied(t *testing.T) map[string]int {
	return appliedCounts(t, f.inbox.DB())
}

// TestAFullInboxIsAnsweredRetryLaterAndRecovers: the receiver's database
// is full (SQLITE_FULL): it answers 503 with Retry-After and applies
// nothing, the worker retries, and once there is room again each
// notification is applied once and the delivery succeeds, without a
// restart of either end.
func TestAFullInboxIsAnsweredRetryLaterAndRecovers(t *testing.T) {
	f := setupFullDisks(t, nil)
	f.run(t)
	if err := f.enqueue(t.Context(), "warm", 0); err != nil {
		t.Fatal(err)
	}
	f.await(t, "warm delivered", func(e client.Event) bool { return e.Status == courier.StatusSucceeded })

	fill(t, f.inbox)
	if status, retry, code := f.post(t, "direct"); status != http.StatusServiceUnavailable || retry == "" || code != string(courier.CodeInternal) {
		t.Errorf("the full receiver answered %d, Retry-After %q, code %q; want 503 with Retry-After, internal_error", status, retry, code)
	}
	if err := f.enqueue(t.Context(), "full", 0); err != nil {
		t.Fatal(err)
	}
	e := f.await(t, "full retried", func(e client.Event) bool { return e.NotificationID == "full" })
	if e.Status != courier.StatusRetryWait {
		t.Errorf("the delivery to the full receiver: %+v, want a retry", e)
	}

	empty(t, f.inbox)
	f.await(t, "full delivered", func(e client.Event) bool {
		return e.NotificationID == "full" && e.Status == courier.StatusSucceeded
	})
	if status, _, _ := f.post(t, "direct"); status != http.StatusOK {
		t.Errorf("once there is room the receiver answered %d", status)
	}
	want := map[string]int{"warm": 1, "full": 1, "direct": 1}
	if got := f.applied(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("applied %v, want %v", got, want)
	}
}

// TestAFullOutboxRefusesTheEnqueueAndRecovers: the sender's database is
// full: an enqueue that needs room fails with database_unavailable and
// leaves nothing behind; the worker, whose claims and settles fail too,
// keeps running, and once there is room again every notification enqueued
// is delivered once, without a restart.
func TestAFullOutboxRefusesTheEnqueueAndRecovers(t *testing.T) {
	f := setupFullDisks(t, nil)
	var ids []string
	for i := range 50 {
		id := fmt.Sprintf("n%02d", i)
		if err := f.enqueue(t.Context(), id, 0); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	fill(t, f.outbox)
	err := f.enqueue(t.Context(), "big", 64<<10)
	if courier.CodeOf(err) != courier.CodeDatabaseUnavailable {
		t.Errorf("an enqueue into the full outbox = %v, want code database_unavailable", err)
	}
	f.run(t)
	select {
	case <-f.logs.logged("worker: claim failed"):
	case <-f.logs.logged("worker: settle failed"):
	case <-time.After(20 * time.Second):
		t.Fatalf("neither a claim nor a settle failed on the full outbox; logged: %+v", f.logs.lines(""))
	}

	empty(t, f.outbox)
	if err := f.enqueue(t.Context(), "big", 64<<10); err != nil {
		t.Fatalf("an enqueue once there is room: %v", err)
	}
	ids = append(ids, "big")
	pending := map[string]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	for len(pending) > 0 {
		e := f.await(t, fmt.Sprintf("%d deliveries outstanding", len(pending)), func(e client.Event) bool { return e.Status == courier.StatusSucceeded })
		delete(pending, e.NotificationID)
	}
	got := f.applied(t)
	for _, id := range ids {
		if got[id] != 1 {
			t.Errorf("%s applied %d times, want once", id, got[id])
		}
	}
	if len(got) != len(ids) {
		t.Errorf("applied %d notifications, want %d", len(got), len(ids))
	}
}

// TestOutcomesTheFullOutboxCannotRecordAreRecordedOnceThereIsRoom: the
// sender's database fills while attempts are in flight, after the
// receiver applied them: their settles fail, and the worker writes each
// outcome again (within its lease) until there is room. Each delivery is
// then settled once, with one attempt logged, and applied once.
//
// The attempts wait for the receiver to answer all of them and for the
// outbox to fill: on a loaded machine that took longer than the default
// Timeout (15 s), and an attempt that timed out was recorded, a retry,
// before the outbox was full. Their Timeout only bounds a stuck attempt.
func TestOutcomesTheFullOutboxCannotRecordAreRecordedOnceThereIsRoom(t *testing.T) {
	const n = 400 // their attempts' log rows need pages of their own
	f := setupFullDisks(t, func(c *client.Config) {
		c.Concurrency, c.EndpointConcurrency, c.BatchSize = n, n, n
		c.Timeout = time.Minute
	})
	ids := map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("n%03d", i)
		if err := f.enqueue(t.Context(), id, 0); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	hold := make(chan struct{})
	f.hold.Store(&hold)
	f.run(t)
	for range n {
		select {
		case <-f.answered:
		case <-time.After(20 * time.Second):
			t.Fatal("the receiver did not answer every delivery within 20s")
		}
	}
	fill(t, f.outbox)
	f.hold.Store(nil)
	close(hold)
	select {
	case <-f.logs.logged("worker: store write failed, trying again"):
	case <-time.After(20 * time.Second):
		t.Fatalf("no settle failed on the full outbox; logged: %+v", lastLines(f.logs.lines(""), 10))
	}
	empty(t, f.outbox)
	for len(ids) > 0 {
		e := f.await(t, fmt.Sprintf("%d deliveries outstanding", len(ids)), func(e client.Event) bool { return true })
		if e.Status != courier.StatusSucceeded || !ids[e.NotificationID] {
			t.Fatalf("event %+v, want each delivery to succeed once", e)
		}
		delete(ids, e.NotificationID)
	}
	var logged []struct {
		Delivery int64  `db:"delivery_id"`
		Attempts int    `db:"attempts"`
		Outcomes string `db:"outcomes"`
	}
	if err := f.outbox.DB().SelectContext(t.Context(), &logged, `SELECT delivery_id, count(*) AS attempts, group_concat(outcome) AS outcomes
		FROM courier_attempts GROUP BY delivery_id HAVING count(*) != 1 OR outcomes != 'succeeded'`); err != nil {
		t.Fatal(err)
	}
	if len(logged) != 0 {
		t.Errorf("deliveries logged other than one succeeded attempt: %+v", logged)
	}
	for id, times := range f.applied(t) {
		if times != 1 {
			t.Errorf("%s applied %d times", id, times)
		}
	}
}

// lastLines is the last n of lines.
func lastLines(lines []logRecord, n int) []logRecord { return lines[max(0, len(lines)-n):] }
