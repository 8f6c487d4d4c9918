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

// Or returns l, or, when l is nil, a logger that hands slog.Default()
// the records at slog.LevelWarn and above. The default is looked up at
// each line, not when Or is called: a part made before the program sets
// its default (a package-level middleware.Recover(nil), say) logs
// through the one set. Held from before, slog's built-in default would
// write into the log package's output, which slog.SetDefault sends to
// the new handler as an Info record of the line's text: its level and
// attributes lost.
func Or(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(warnUp{})
}

// warnUp passes on the records from slog.LevelWarn up to slog's default
// handler of the moment, with the attributes and groups its loggers
// added (with, in order), which are added to that handler anew for each
// line: courier's parts add none, and a line at Warn is rare.
type warnUp struct {
	with []func(slog.Handler) slog.Handler
}

// handler is slog's default handler now, with h's attributes and groups.
func (h warnUp) handler() slog.Handler {
	out := slog.Default().Handler()
	for _, add := range h.with {
		out = add(out)
	}
	return out
}

func (h warnUp) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && h.handler().Enabled(ctx, level)
}

func (h warnUp) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	return h.handler().Handle(ctx, r)
}

func (h warnUp) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return h.and(func(d slog.Handler) slog.Handler { return d.WithAttrs(attrs) })
}

func (h warnUp) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.and(func(d slog.Handler) slog.Handler { return d.WithGroup(name) })
}

// and returns h with add after what it adds already, sharing no array
// with h, so that two loggers made from one add only their own.
func (h warnUp) and(add func(slog.Handler) slog.Handler) warnUp {
	return warnUp{with: append(h.with[:len(h.with):len(h.with)], add)}
}
