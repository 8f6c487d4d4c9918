package store_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestHookPanicIsLoggedOnTheDefaultLogger: Config.Hook says a panic in it
// is dropped and logged at Error on slog's default logger (the Store has
// no Logger of its own), and the package courier lists "store: " among
// the parts whose lines use only its documented keys. One panicking event
// is one such line. Not parallel: it sets slog's default logger.
func TestHookPanicIsLoggedOnTheDefaultLogger(t *testing.T) {
	h := &logtest.Records{}
	prev := slog.Default()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() { slog.SetDefault(prev) })

	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "hook.db"), store.Config{Hook: func(store.Event) { panic("hook") }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
		NotificationID: "hook-panics", Endpoint: "https://receiver.example/hooks", Payload: []byte(`{}`),
	}); err != nil {
		t.Fatalf("Enqueue with a panicking Hook: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	got := h.All()
	if len(got) != 1 {
		t.Fatalf("the default logger heard %d lines, want 1 for the one event the Hook panicked at", len(got))
	}
	r := got[0]
	if r.Level != slog.LevelError || !strings.HasPrefix(r.Message, "store: ") {
		t.Fatalf("logged %s %q, want Error, starting with %q", r.Level, r.Message, "store: ")
	}
	if keys := logkey.Undocumented(r); len(keys) != 0 {
		t.Fatalf("undocumented keys %v", keys)
	}
	panicked := false
	r.Attrs(func(a slog.Attr) bool {
		panicked = panicked || a.Key == logkey.Panic && a.Value.Kind() == slog.KindBool && a.Value.Bool()
		return true
	})
	if !panicked {
		t.Fatalf("the line does not say %s=true", logkey.Panic)
	}
}
