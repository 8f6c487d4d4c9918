package logtest_test

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/courier-go/courier/internal/logtest"
)

// noTime is a JSONHandler's options that leave the time out, so that two
// renderings of one record compare equal.
var noTime = &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
	if groups == nil && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}}

// TestRecordsKeepWhatWithAdds logs through loggers made with With and
// WithGroup, once to Records and once to a slog.JSONHandler, and renders
// what Records kept through a JSONHandler: the two must read the same, so a
// test scanning the records sees every attribute a logger carries, where
// slog's own handlers would print it.
func TestRecordsKeepWhatWithAdds(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
	}{
		{"plain", func(l *slog.Logger) { l.Info("m", "k", 1) }},
		{"with", func(l *slog.Logger) { l.With("token", "s3cret").Info("m", "k", 1) }},
		{"with twice", func(l *slog.Logger) { l.With("a", 1).With("b", 2).Warn("m", "c", 3) }},
		{"groups", func(l *slog.Logger) {
			l.With("a", 1).WithGroup("g").With("b", 2).WithGroup("h").Error("m", "c", 3)
		}},
		{"group of a group", func(l *slog.Logger) {
			l.WithGroup("g").With(slog.Group("sub", "x", 1)).Info("m", slog.Group("own", "y", 2))
		}},
		{"empty group left out", func(l *slog.Logger) { l.With("a", 1).WithGroup("g").Info("m") }},
		{"empty inner group left out", func(l *slog.Logger) {
			l.WithGroup("g").With("a", 1).WithGroup("h").Info("m")
		}},
		{"unnamed group", func(l *slog.Logger) { l.WithGroup("").With("a", 1).Info("m", "b", 2) }},
		{"siblings", func(l *slog.Logger) {
			parent := l.With("p", 0).WithGroup("g").With("q", 1)
			x, y := parent.With("x", 2), parent.With("y", 3)
			y.WithGroup("h").Info("y")
			x.Info("x")
			parent.Info("parent")
			l.Info("root")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			tc.log(slog.New(slog.NewJSONHandler(&want, noTime)))

			var kept logtest.Records
			tc.log(slog.New(&kept))
			var got bytes.Buffer
			render := slog.NewJSONHandler(&got, noTime)
			for _, r := range kept.All() {
				if err := render.Handle(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
			if got.String() != want.String() {
				t.Errorf("kept, rendered:\n%s\nslog's JSONHandler:\n%s", got.String(), want.String())
			}
		})
	}
}

// TestRecordsWithIsSharedAndSafe logs from many goroutines through
// loggers made with With from one Records: All returns every line, each
// with its own logger's attribute.
func TestRecordsWithIsSharedAndSafe(t *testing.T) {
	var kept logtest.Records
	base := slog.New(&kept).WithGroup("g")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			l := base.With("i", i)
			for range 50 {
				l.Info("m")
			}
		})
	}
	wg.Wait()
	recs := kept.All()
	if len(recs) != 8*50 {
		t.Fatalf("kept %d records, want %d", len(recs), 8*50)
	}
	seen := map[string]int{}
	for _, r := range recs {
		var attrs []string
		r.Attrs(func(a slog.Attr) bool {
			attrs = append(attrs, a.String())
			return true
		})
		seen[strings.Join(attrs, " ")]++
	}
	for i := range 8 {
		if k := "g=[i=" + strconv.Itoa(i) + "]"; seen[k] != 50 {
			t.Errorf("%d records with %s, want 50 (all: %v)", seen[k], k, seen)
		}
	}
}

// TestAsDefaultEndsWithItsTest: once the test that called AsDefault ends,
// neither slog's default logger nor the log package writes to its
// Records any more. slog.SetDefault back to the logger that was the
// default left the log package's output at the Records, and slog's
// built-in default writes through it: every later line of the process
// went there.
func TestAsDefaultEndsWithItsTest(t *testing.T) {
	var out bytes.Buffer
	w, flags := log.Writer(), log.Flags()
	log.SetOutput(&out)
	log.SetFlags(0)
	t.Cleanup(func() { log.SetOutput(w); log.SetFlags(flags) })

	var logs *logtest.Records
	t.Run("AsDefault", func(t *testing.T) {
		logs = logtest.AsDefault(t)
		slog.Warn("during")
	})
	slog.Warn("after, through slog")
	log.Print("after, through log")
	if got := logs.All(); len(got) != 1 || got[0].Message != "during" {
		t.Errorf("the Records kept %v, want the line logged during its test alone", got)
	}
	if got, want := out.String(), "WARN after, through slog\nafter, through log\n"; got != want {
		t.Errorf("the log package's output got %q, want %q", got, want)
	}
}

// TestAsDefaultRefusesAParallelTest: the default logger is the
// process's, so AsDefault in a parallel test panics rather than let
// another test's lines in, or its own out.
func TestAsDefaultRefusesAParallelTest(t *testing.T) {
	t.Run("parallel", func(t *testing.T) {
		t.Parallel()
		defer func() {
			if recover() == nil {
				t.Error("AsDefault in a parallel test did not panic")
			}
		}()
		logtest.AsDefault(t)
	})
}
