package client_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/courier-go/courier/internal/logkey"
)

// logRecord is one captured log line: its level, message and attributes
// (values as text).
type logRecord struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// capture is a slog.Handler that keeps every record, at every level, and
// signals waiters when a line with a given message is logged. The test
// that made it fails if a line has a key courier's documentation does not
// list (see internal/logkey), and if the worker adds attributes or a group
// with With or WithGroup: capture does not keep those, so a test reading
// its lines would not see them.
type capture struct {
	mu           sync.Mutex
	records      []logRecord
	waiters      map[string][]chan struct{}
	undocumented []string // "message: key"
	derived      []string // what With or WithGroup added
}

func newCapture(t testing.TB) *capture {
	c := &capture{waiters: make(map[string][]chan struct{})}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.undocumented) > 0 {
			t.Errorf("the worker logged keys courier's documentation does not list: %v", c.undocumented)
		}
		if len(c.derived) > 0 {
			t.Errorf("the worker added %v with With or WithGroup, which capture does not keep", c.derived)
		}
	})
	return c
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }

func (c *capture) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Message: r.Message, Attrs: make(map[string]string)}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range logkey.Undocumented(r) {
		c.undocumented = append(c.undocumented, r.Message+": "+k)
	}
	c.records = append(c.records, rec)
	for _, ch := range c.waiters[r.Message] {
		close(ch)
	}
	delete(c.waiters, r.Message)
	return nil
}

func (c *capture) WithAttrs(as []slog.Attr) slog.Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range as {
		c.derived = append(c.derived, "attribute "+a.Key)
	}
	return c
}

func (c *capture) WithGroup(name string) slog.Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.derived = append(c.derived, "group "+name)
	return c
}

// logged returns a channel closed once a line with msg is logged (at once
// if one was).
func (c *capture) logged(msg string) <-chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.records {
		if r.Message == msg {
			close(ch)
			return ch
		}
	}
	c.waiters[msg] = append(c.waiters[msg], ch)
	return ch
}

// lines returns the records with message msg ("" for all).
func (c *capture) lines(msg string) []logRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []logRecord
	for _, r := range c.records {
		if msg == "" || r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}
