// Package logdefault is the logger courier's parts log through when their
// config names none: slog's default logger, from Warn up. A worker whose
// claims fail, a receiver whose database is down or a handler that
// panicked is heard without any setup, while the lines of routine work
// (Info: a refused request, a retry; Debug: each attempt) wait for a
// Logger given on purpose. Silence is a Logger too:
// slog.New(slog.DiscardHandler).
package logdefault

import (
	"context"
	"log/slog"
)

// Or returns l, or, when l is nil, slog.Default() as it is now, passing
// on only the records at slog.LevelWarn and above. The default is read
// once: a logger set with slog.SetDefault afterwards is not followed.
func Or(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(warnUp{slog.Default().Handler()})
}

// warnUp passes on the records of its Handler's from slog.LevelWarn up.
type warnUp struct{ slog.Handler }

func (h warnUp) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && h.Handler.Enabled(ctx, level)
}

func (h warnUp) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h warnUp) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnUp{h.Handler.WithAttrs(attrs)}
}

func (h warnUp) WithGroup(name string) slog.Handler {
	return warnUp{h.Handler.WithGroup(name)}
}
