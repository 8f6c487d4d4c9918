package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store/internal/engine"
)

// The worker protocol (package internal/protocol) is implemented here and
// handed to package client, so a Store's public surface is what
// applications call.
func init() {
	protocol.Register(func(s any) protocol.Outbox { return workerSide{s.(*Store).Outbox} })
	protocol.RegisterInbox(func(s any) protocol.Inbox { return receiverSide{s.(*Store).Inbox} })
}

// workerSide is an Outbox as its workers see it.
type workerSide struct{ o *Outbox }

func (w workerSide) Claim(ctx context.Context, p protocol.ClaimParams) ([]protocol.Claimed, error) {
	return w.o.claim(ctx, p)
}

func (w workerSide) Settle(ctx context.Context, outcomes ...protocol.Outcome) ([]protocol.Settled, error) {
	return w.o.settle(ctx, outcomes...)
}

func (w workerSide) Release(ctx context.Context, leases ...protocol.Lease) (int, error) {
	return w.o.release(ctx, leases...)
}

func (w workerSide) Tracer() courier.Tracer { return w.o.s.cfg.Tracer }

func (w workerSide) Closed() context.Context { return w.o.s.life }

func (r receiverSide) Tracer() courier.Tracer { return r.in.s.cfg.Tracer }

func (w workerSide) Profile(name string) (ack.Profile, bool) { return w.o.s.cfg.Profiles(name) }

// Listen never takes the last connection of the Store's pool for
// wake-ups that hold one for as long as they run (PostgreSQL's LISTEN):
// a Run listening on a pool with no connection to spare would leave none
// for its own claims, and deliver nothing. It refuses instead
// (config_invalid), and the Run polls. The connections held are counted
// per pool, not per Store: the Runs of every Store opened over one pool
// leave it a connection between them.
func (w workerSide) Listen(ctx context.Context) (<-chan struct{}, func(), error) {
	s := w.o.s
	if s.closed.Load() { // as every call after Close: no connection is taken for it
		return nil, nil, errClosed
	}
	if s.dialect.Listen == nil {
		return make(chan struct{}), func() {}, nil // no wake-ups: polling only
	}
	if !s.dialect.ListenHoldsConn {
		ch, stop, err := s.dialect.Listen(ctx, s.db)
		return ch, stop, wrapf(err, "listen")
	}
	pool := s.db.DB
	if limit, ok := listening.take(pool); !ok {
		return nil, nil, configError(fmt.Sprintf("listen: the pool holds at most %d connections (db.SetMaxOpenConns) and wake-ups would take the last one claims need: give it one more for each Run (see Open)", limit))
	}
	ch, stop, err := s.dialect.Listen(ctx, s.db)
	if err != nil {
		listening.give(pool)
		return nil, nil, wrapf(err, "listen")
	}
	return ch, sync.OnceFunc(func() { stop(); listening.give(pool) }), nil
}

// listening counts, per pool, the connections wake-ups hold in LISTEN.
var listening = listeners{held: make(map[*sql.DB]int)}

// listeners are the connections of each pool held by wake-ups.
type listeners struct {
	mu   sync.Mutex
	held map[*sql.DB]int
}

// take counts one more connection of pool held by wake-ups, unless that
// would leave the pool none (its limit, db.SetMaxOpenConns, then comes
// back with false).
func (l *listeners) take(pool *sql.DB) (limit int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit = pool.Stats().MaxOpenConnections
	if limit > 0 && l.held[pool]+1 >= limit {
		return limit, false
	}
	l.held[pool]++
	return limit, true
}

// give counts one connection of pool fewer held by wake-ups.
func (l *listeners) give(pool *sql.DB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[pool]--; l.held[pool] <= 0 {
		delete(l.held, pool)
	}
}

// receiverSide is an Inbox as courier's receivers see it.
type receiverSide struct{ in *Inbox }

func (r receiverSide) Record(ctx context.Context, tx protocol.DBTX, k protocol.InboxKey) (protocol.Receipt, error) {
	return r.in.record(ctx, tx, k)
}

func (r receiverSide) Find(ctx context.Context, tx protocol.DBTX, k protocol.InboxKey) (protocol.Receipt, bool, error) {
	return r.in.find(ctx, tx, k)
}

func (r receiverSide) RecordCompleted(ctx context.Context, tx protocol.DBTX, k protocol.InboxKey, answer []byte) (protocol.Receipt, error) {
	return r.in.recordCompleted(ctx, tx, k, answer)
}

func (r receiverSide) Complete(ctx context.Context, tx protocol.DBTX, k protocol.InboxKey, answer []byte) error {
	return r.in.complete(ctx, tx, k, answer)
}

func (r receiverSide) Claim(ctx context.Context, k protocol.InboxKey, stale time.Duration) (protocol.Receipt, protocol.InboxClaim, error) {
	return r.in.claim(ctx, k, stale)
}

func (r receiverSide) CompleteClaim(ctx context.Context, tx protocol.DBTX, c protocol.InboxClaim, answer []byte) error {
	return r.in.completeClaim(ctx, tx, c, answer)
}

func (r receiverSide) ReleaseClaim(ctx context.Context, c protocol.InboxClaim) error {
	return r.in.releaseClaim(ctx, c)
}

func (r receiverSide) Unavailable(err error) bool {
	if errors.Is(err, courier.CodeDatabaseUnavailable) {
		return true
	}
	switch r.in.s.dialect.Interpret(err).Kind {
	case engine.Busy, engine.ReadOnly, engine.Unavailable, engine.Corrupt:
		return true
	}
	return false
}
