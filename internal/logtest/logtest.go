// Package logtest records what a slog.Logger hears, for courier's tests
// of what its parts log.
package logtest

import (
	"context"
	"log/slog"
	"sync"
)

// Records is a slog.Handler that keeps every record, at every level, in
// the order they were handled. Its zero value is ready to use, and it is
// safe for concurrent use.
type Records struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *Records) Enabled(context.Context, slog.Level) bool { return true }
func (l *Records) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *Records) WithGroup(string) slog.Handler            { return l }

func (l *Records) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

// All returns the records kept so far.
func (l *Records) All() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Record(nil), l.records...)
}
