// Package retry tries a store write again while the store may come back:
// the worker's settles and releases, and a receiver's give-back of a
// claim, whose loss would cost a redelivery or a key left in progress;
// Sleep is its jittered pause, for other loops that try again.
package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
)

// The pause before a failed write is tried again: first, doubling up to
// maxPause, each jittered between half and all of it.
const (
	firstPause = 10 * time.Millisecond
	maxPause   = 500 * time.Millisecond
)

// Write runs write until it succeeds, fails with CodeInvalidArgument or
// on a closed Store (a retry would fail alike), or window ends, and returns its last error.
// write runs under ctx's values but not its cancellation: the caller
// going away does not abandon a write others depend on, and window bounds
// it instead. failed, if not nil, hears each error that is tried again.
func Write(ctx context.Context, window time.Duration, write func(context.Context) error, failed func(context.Context, error)) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), window)
	defer cancel()
	pause := firstPause
	for {
		err := write(ctx)
		if err == nil || courier.CodeOf(err) == courier.CodeInvalidArgument || errors.Is(err, protocol.ErrClosed) || ctx.Err() != nil {
			return err
		}
		if failed != nil {
			failed(ctx, err)
		}
		if !Sleep(ctx, pause) {
			return err
		}
		pause = min(2*pause, maxPause)
	}
}

// Sleep waits out pause, jittered between half and all of it, so that
// writers that failed together do not try again together; it reports
// false, at once, when ctx ends first.
func Sleep(ctx context.Context, pause time.Duration) bool {
	t := time.NewTimer(pause/2 + rand.N(pause/2+1))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
