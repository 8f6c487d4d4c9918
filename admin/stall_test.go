package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/logtest"
)

// TestAReadTheDatabaseDoesNotAnswerIsUnavailable: a database that stops
// answering (here, courier_outbox locked by another transaction) held a
// health probe or a page for as long as it stalled, 40 seconds in an
// adopter's failover test, and answered 200 after. A read waits for it
// no longer than its bound, and is answered 503 database_unavailable
// with Retry-After, logged at Warn.
func TestAReadTheDatabaseDoesNotAnswerIsUnavailable(t *testing.T) {
	t.Parallel()
	s := openPostgresStore(t)
	var logs logtest.Records
	h, err := NewHandler(Config{Store: s, Logger: slog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	h.reads = 300 * time.Millisecond
	locker, err := s.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Rollback()
	if _, err := locker.ExecContext(t.Context(), "LOCK TABLE courier_outbox IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/health", "/api/deliveries", "/"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, p, nil))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("%s: %d %v %s, want 503 with Retry-After", p, rec.Code, rec.Header(), rec.Body)
		}
		var pb problemBody
		if err := json.Unmarshal(rec.Body.Bytes(), &pb); err != nil || pb.Code != courier.CodeDatabaseUnavailable {
			t.Fatalf("%s: %s (%v), want code database_unavailable", p, rec.Body, err)
		}
	}
	for _, r := range logs.All() {
		if r.Level != slog.LevelWarn || r.Message != "admin: database did not answer in time" {
			t.Fatalf("logged %s %q, want Warn that the database did not answer in time", r.Level, r.Message)
		}
	}
	if n := len(logs.All()); n != 3 {
		t.Fatalf("%d log lines, want 3", n)
	}
}

// TestARequestItsClientEndedIsNoFailure: a request whose client went
// away before the database answered (its context cancelled, as net/http
// cancels it) is no store failure: it was logged at Error, "admin: store
// failed"; it is logged once, at Info, and answered 503 (which no one
// reads).
func TestARequestItsClientEndedIsNoFailure(t *testing.T) {
	t.Parallel()
	var logs logtest.Records
	b := setupAdminConfig(t, Config{Logger: slog.New(&logs)})
	h, err := NewHandler(Config{Store: b.store, Logger: slog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/health", "/api/deliveries", "/"} {
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // the client is gone before the store is asked
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, p, nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: %d %s, want 503", p, rec.Code, rec.Body)
		}
	}
	recs := logs.All()
	if len(recs) != 3 {
		t.Fatalf("%d log lines, want 3", len(recs))
	}
	for _, r := range recs {
		if r.Level != slog.LevelInfo || r.Message != "admin: request ended by its client" || len(logkey.Undocumented(r)) != 0 {
			t.Fatalf("logged %s %q, want Info that the client ended the request", r.Level, r.Message)
		}
	}
}
