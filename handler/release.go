package handler

import (
	"container/list"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/retry"
)

// releaseWindow is how long a claim's release is tried: long enough to
// ride out a database restart or a dropped connection, well short of a
// sender's attempt timeout (the client's is 15 seconds).
const releaseWindow = 5 * time.Second

// releaseClaim gives c back after processing failed, so that the
// sender's retry processes the notification. A release that fails (the
// database went away for a moment, the very failure that may have failed
// processing) is tried again for up to releaseWindow, with ctx's values
// but not its cancellation (retry.Write): a claim left processing would
// answer every retry 503 in_progress until it goes stale. The claim is
// fenced, so a release after another request took it over is a no-op.
// Only a release that still fails is logged, and it reports false.
func releaseClaim(ctx context.Context, inbox protocol.Inbox, c protocol.InboxClaim, logger *slog.Logger) bool {
	err := retry.Write(ctx, releaseWindow, func(ctx context.Context) error { return inbox.ReleaseClaim(ctx, c) }, nil)
	if err != nil {
		logger.ErrorContext(ctx, "handler: claim not released", slog.String(logkey.Code, string(courier.CodeInternal)), slog.Any(logkey.Error, err))
	}
	return err == nil
}

// maxUnreleased bounds the claims a receiver remembers it could not give
// back; past it, the oldest is forgotten, and left to go stale.
const maxUnreleased = 10_000

// unreleased are the claims a receiver could not give back (a Reporting
// receiver's claims, a Source's records its function committed), even
// after retrying (the database was away longer than releaseWindow), by key: the
// sender's retry of such a key finds it in progress, and would until the
// claim goes stale. The retry gives it back first (retry), then claims it
// anew. A claim another request took over since is not given back: the
// release is fenced.
//
// Most keys remembered never come back to this receiver: their retries
// reach another process of it, or come after StaleAfter and take the
// claim over. Such a claim is of no use any more, and nothing says so but
// its age, so when maxUnreleased are remembered the oldest makes room for
// the newest, whose retry is the likeliest still to come: a receiver that
// runs for months, the database going away now and then, keeps
// remembering what it could not give back.
type unreleased struct {
	mu     sync.Mutex
	claims map[unreleasedKey]*list.Element // of order
	order  list.List                       // of unreleasedClaim, oldest first
}

type unreleasedKey struct{ sender, key string }

type unreleasedClaim struct {
	key   unreleasedKey
	claim protocol.InboxClaim
}

// giveBack gives claim c back (releaseClaim), or, when the store stays
// away longer than releaseWindow, remembers it for the key's next request
// to give back first (retry): a claim left processing answers every
// retry in_progress, a Reporting receiver's until it goes stale, a
// Source's record (never taken over) until Prune.
func (u *unreleased) giveBack(ctx context.Context, inbox protocol.Inbox, c protocol.InboxClaim, logger *slog.Logger) {
	if !releaseClaim(ctx, inbox, c, logger) {
		u.add(c)
	}
}

// add remembers c, the newest claim of its key, forgetting the oldest
// claim remembered if maxUnreleased are.
func (u *unreleased) add(c protocol.InboxClaim) {
	k := unreleasedKey{c.Key.Sender, c.Key.Key}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.claims == nil {
		u.claims = make(map[unreleasedKey]*list.Element)
	}
	if e, ok := u.claims[k]; ok {
		e.Value = unreleasedClaim{k, c}
		u.order.MoveToBack(e)
		return
	}
	if len(u.claims) >= maxUnreleased {
		oldest := u.order.Remove(u.order.Front()).(unreleasedClaim)
		delete(u.claims, oldest.key)
	}
	u.claims[k] = u.order.PushBack(unreleasedClaim{k, c})
}

// releaseRemembered gives back the claim this receiver could not give
// back on key, if it has one, and reports whether it did.
func (u *unreleased) releaseRemembered(ctx context.Context, inbox protocol.Inbox, key protocol.InboxKey) bool {
	k := unreleasedKey{key.Sender, key.Key}
	u.mu.Lock()
	e, ok := u.claims[k]
	var c protocol.InboxClaim
	if ok {
		c = e.Value.(unreleasedClaim).claim
	}
	u.mu.Unlock()
	if !ok || inbox.ReleaseClaim(ctx, c) != nil {
		return false
	}
	u.mu.Lock()
	// Forgotten only if it is still the one given back: a newer claim of
	// the key, remembered meanwhile, is kept.
	if e, ok := u.claims[k]; ok && e.Value.(unreleasedClaim).claim == c {
		u.order.Remove(e)
		delete(u.claims, k)
	}
	u.mu.Unlock()
	return true
}
