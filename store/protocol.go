package store

import (
	"context"

	"github.com/courier-go/courier/internal/protocol"
)

// The worker protocol (package internal/protocol) is implemented here and
// handed to package client, so a Store's public surface is what
// applications call.
func init() {
	protocol.Register(func(s any) protocol.Outbox { return workerSide{s.(*Store).Outbox} })
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

func (w workerSide) Listen(ctx context.Context) (<-chan struct{}, func(), error) {
	if w.o.s.dialect.Listen == nil {
		return make(chan struct{}), func() {}, nil // no wake-ups: polling only
	}
	ch, stop, err := w.o.s.dialect.Listen(ctx, w.o.s.db)
	return ch, stop, wrapf(err, "listen")
}
