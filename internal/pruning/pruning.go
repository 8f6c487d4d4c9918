// Package pruning is what a dry run of courier prune reads of a store:
// how many rows each of its prunes would delete, counted by reads that
// share each delete statement's own choice of rows and lock none, so that
// the dry run prints what the prune then takes. Package store implements
// it and registers it here, so that its public surface stays what
// applications call.
package pruning

import (
	"context"
	"sync/atomic"
	"time"
)

// Count counts the rows a prune of records older than olderThan would
// delete, every batch of it, and deletes none. It refuses an olderThan
// the prune refuses, as the prune does.
type Count func(ctx context.Context, olderThan time.Duration) (int, error)

// Counts are a store's counts of what each of its prunes would delete.
type Counts struct {
	Outbox   Count // store.Outbox.Prune: finished deliveries, then dead endpoints' breaker records
	Attempts Count // store.Outbox.PruneAttempts
	Inbox    Count // store.Inbox.Prune
	Replay   Count // store.ReplayCache.Prune: expired pairs, then their minutes' counts; olderThan is not read
}

var counts atomic.Pointer[func(s any) Counts]

// Register makes f the way to a store's Counts (package store does so).
func Register(f func(s any) Counts) { counts.Store(&f) }

// For returns the Counts of s, a *store.Store.
func For(s any) Counts { return (*counts.Load())(s) }
