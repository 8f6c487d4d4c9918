// Package logtest records what a slog.Logger hears, for courier's tests
// of what its parts log.
package logtest

import (
	"context"
	"log"
	"log/slog"
	"slices"
	"sync"
	"testing"
)

// Records is a slog.Handler that keeps every record, at every level, in
// the order they were handled. Its zero value is ready to use, and it is
// safe for concurrent use.
//
// The handlers WithAttrs and WithGroup return keep their records in the
// same Records, each with the attributes added by the loggers' With
// before the record's own, qualified by the groups open when they were
// added, as slog's built-in handlers show them: a record kept through
// logger.With("a", 1).WithGroup("g").Info("m", "b", 2) has the attributes
// a=1 and g={b=2}. A group that would be empty is left out.
type Records struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *Records) Enabled(context.Context, slog.Level) bool { return true }

func (l *Records) WithAttrs(as []slog.Attr) slog.Handler { return scoped{root: l}.WithAttrs(as) }
func (l *Records) WithGroup(name string) slog.Handler    { return scoped{root: l}.WithGroup(name) }

func (l *Records) Handle(_ context.Context, r slog.Record) error {
	l.keep(r.Clone())
	return nil
}

func (l *Records) keep(r slog.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
}

// All returns the records kept so far.
func (l *Records) All() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Record(nil), l.records...)
}

// scoped is a handler of root's with attributes and groups added. It is
// never changed once made, so the handlers made from one do not share
// what they add.
type scoped struct {
	root  *Records
	attrs []slog.Attr // added outside any group
	// groups are the open groups, outermost first, each with the attributes
	// added while it was the innermost.
	groups []group
}

type group struct {
	name  string
	attrs []slog.Attr
}

func (h scoped) Enabled(context.Context, slog.Level) bool { return true }

func (h scoped) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	if n := len(h.groups); n > 0 {
		h.groups = slices.Clone(h.groups)
		h.groups[n-1].attrs = slices.Concat(h.groups[n-1].attrs, as)
	} else {
		h.attrs = slices.Concat(h.attrs, as)
	}
	return h
}

func (h scoped) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h.groups = append(slices.Clip(h.groups), group{name: name})
	return h
}

func (h scoped) Handle(_ context.Context, r slog.Record) error {
	var inner []slog.Attr
	r.Attrs(func(a slog.Attr) bool {
		inner = append(inner, a)
		return true
	})
	for i := len(h.groups) - 1; i >= 0; i-- {
		members := slices.Concat(h.groups[i].attrs, inner)
		inner = nil
		if len(members) > 0 {
			inner = []slog.Attr{{Key: h.groups[i].name, Value: slog.GroupValue(members...)}}
		}
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(slices.Concat(h.attrs, inner)...)
	h.root.keep(out)
	return nil
}

// OnMessage is a slog.Handler that calls Do for each record whose message
// is Msg, and drops every record: a test waits with it for a part to
// reach a point it logs.
type OnMessage struct {
	Msg string
	Do  func()
}

func (h OnMessage) Enabled(context.Context, slog.Level) bool { return true }

func (h OnMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.Msg {
		h.Do()
	}
	return nil
}

func (h OnMessage) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h OnMessage) WithGroup(string) slog.Handler { return h }

// AsDefault makes a new Records the handler of slog's default logger
// until t ends, and returns it: what courier's parts log without a Logger
// of their own goes there (see SetDefault).
func AsDefault(t testing.TB) *Records {
	t.Helper()
	var l Records
	SetDefault(t, &l)
	return &l
}

// SetDefault makes h the handler of slog's default logger until t ends,
// and with it the log package's output, as slog.SetDefault does; then
// both are as they were. (slog.SetDefault back to the logger that was
// the default would leave the log package writing to h, and slog's
// built-in default writes through it: every line after t, to h.)
//
// The default logger is the process's: t must not be parallel, and no
// test may be parallel beside it. The test runner starts the parallel
// tests of a package only once its others have ended, and subtests that
// call t.Parallel only once their parent's function has returned;
// SetDefault panics in a parallel test, or one under a parallel parent,
// and t.Parallel after it panics, as after t.Setenv.
func SetDefault(t testing.TB, h slog.Handler) {
	t.Helper()
	t.Setenv("COURIER_LOGTEST_DEFAULT", t.Name()) // refused in a parallel test, and t.Parallel after it
	old, w, flags, prefix := slog.Default(), log.Writer(), log.Flags(), log.Prefix()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() {
		slog.SetDefault(old)
		log.SetOutput(w)
		log.SetFlags(flags)
		log.SetPrefix(prefix)
	})
}

// Messages returns the messages of the records kept so far at level and
// above, in order.
func (l *Records) Messages(level slog.Level) []string {
	var out []string
	for _, r := range l.All() {
		if r.Level >= level {
			out = append(out, r.Message)
		}
	}
	return out
}
