package logdefault

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/logtest"
)

// TestOrKeepsAGivenLogger: a Logger given is used as it is, Info and all.
func TestOrKeepsAGivenLogger(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if got := Or(l); got != l {
		t.Fatalf("Or(l) = %p, want l itself (%p)", got, l)
	}
}

// asText makes a text handler that takes every level slog's default
// until t ends, and returns what it writes.
func asText(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	logtest.SetDefault(t, slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return &buf
}

// TestOrDefaultsToSlogsDefaultFromWarnUp: without a Logger, Warn and Error
// reach slog's default logger, with the attributes and groups added on
// the way (each logger its own); Info and Debug do not, even when the
// default takes them.
func TestOrDefaultsToSlogsDefaultFromWarnUp(t *testing.T) {
	buf := asText(t)
	l := Or(nil).With("part", "worker").WithGroup("g")
	l.With("other", 2).Warn("other line")
	l.Debug("debug line")
	l.Info("info line")
	l.Warn("warn line", "k", 1)
	l.Error("error line")
	out := buf.String()
	for _, quiet := range []string{"debug line", "info line", `msg="warn line" part=worker g.other`} {
		if strings.Contains(out, quiet) {
			t.Errorf("default logger got %q:\n%s", quiet, out)
		}
	}
	for _, heard := range []string{
		`level=WARN msg="other line" part=worker g.other=2`,
		`level=WARN msg="warn line" part=worker g.k=1`,
		`level=ERROR msg="error line" part=worker`,
	} {
		if !strings.Contains(out, heard) {
			t.Errorf("default logger lacks %q:\n%s", heard, out)
		}
	}
	if h := Or(nil).Handler(); h.Enabled(t.Context(), slog.LevelInfo) || !h.Enabled(t.Context(), slog.LevelWarn) {
		t.Errorf("Enabled(Info) = %v, Enabled(Warn) = %v; want false, true",
			h.Enabled(t.Context(), slog.LevelInfo), h.Enabled(t.Context(), slog.LevelWarn))
	}
}

// TestOrFollowsTheDefaultSetAfterwards: a part made before the program
// sets its default logger (a package-level middleware.Recover(nil), say)
// logs through the one set, each line at its own level, with its
// attributes. Held from when the part was made, slog's built-in default
// wrote into the log package's output, which the new default took as an
// Info line whose message was the text "WARN warn line part=worker k=1".
func TestOrFollowsTheDefaultSetAfterwards(t *testing.T) {
	l := Or(nil).With("part", "worker") // slog's built-in default in place
	buf := asText(t)
	l.Warn("warn line", "k", 1)
	if want := `level=WARN msg="warn line" part=worker k=1`; !strings.Contains(buf.String(), want) {
		t.Errorf("default set afterwards got %q, want %q", buf.String(), want)
	}
}

// TestOrHandlesOnlyWarnUp: a record handed to the handler directly,
// without asking Enabled first (as a handler that fans records out to
// others may), is dropped below Warn too; and the log.Logger that
// slog.NewLogLogger makes of it, which asks Enabled, writes only at Warn.
func TestOrHandlesOnlyWarnUp(t *testing.T) {
	buf := asText(t)
	h := Or(nil).Handler()
	for _, r := range []slog.Record{
		slog.NewRecord(time.Now(), slog.LevelInfo, "direct info", 0),
		slog.NewRecord(time.Now(), slog.LevelWarn, "direct warning", 0),
	} {
		if err := h.Handle(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	slog.NewLogLogger(h, slog.LevelInfo).Print("server info")
	slog.NewLogLogger(h, slog.LevelWarn).Print("server warning")
	out := buf.String()
	for _, quiet := range []string{"direct info", "server info"} {
		if strings.Contains(out, quiet) {
			t.Errorf("default logger got %q:\n%s", quiet, out)
		}
	}
	for _, heard := range []string{"direct warning", "server warning"} {
		if !strings.Contains(out, heard) {
			t.Errorf("default logger lacks %q:\n%s", heard, out)
		}
	}
}
