package logdefault

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestOrKeepsAGivenLogger: a Logger given is used as it is, Info and all.
func TestOrKeepsAGivenLogger(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if got := Or(l); got != l {
		t.Fatalf("Or(l) = %p, want l itself (%p)", got, l)
	}
}

// TestOrDefaultsToSlogsDefaultFromWarnUp: without a Logger, Warn and Error
// reach slog's default logger, with the attributes and groups added on
// the way; Info and Debug do not, even when the default takes them.
func TestOrDefaultsToSlogsDefaultFromWarnUp(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	l := Or(nil).With("part", "worker").WithGroup("g")
	l.Debug("debug line")
	l.Info("info line")
	l.Warn("warn line", "k", 1)
	l.Error("error line")
	out := buf.String()
	for _, quiet := range []string{"debug line", "info line"} {
		if strings.Contains(out, quiet) {
			t.Errorf("default logger got %q:\n%s", quiet, out)
		}
	}
	for _, heard := range []string{`level=WARN msg="warn line" part=worker g.k=1`, `level=ERROR msg="error line" part=worker`} {
		if !strings.Contains(out, heard) {
			t.Errorf("default logger lacks %q:\n%s", heard, out)
		}
	}
	if h := Or(nil).Handler(); h.Enabled(t.Context(), slog.LevelInfo) || !h.Enabled(t.Context(), slog.LevelWarn) {
		t.Errorf("Enabled(Info) = %v, Enabled(Warn) = %v; want false, true",
			h.Enabled(t.Context(), slog.LevelInfo), h.Enabled(t.Context(), slog.LevelWarn))
	}
}

// TestOrHandlesOnlyWarnUp: a record handed to the handler directly (as
// slog.NewLogLogger's writes are, at the level it was made with) is
// dropped below Warn too.
func TestOrHandlesOnlyWarnUp(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	slog.NewLogLogger(Or(nil).Handler(), slog.LevelInfo).Print("server info")
	slog.NewLogLogger(Or(nil).Handler(), slog.LevelWarn).Print("server warning")
	if out := buf.String(); strings.Contains(out, "server info") || !strings.Contains(out, "server warning") {
		t.Errorf("log.Logger lines through the default: %q; want the warning alone", out)
	}
}
