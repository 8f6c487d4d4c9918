package store

import (
	"context"
	"time"
)

// ReplayCache remembers signature (key id, nonce) pairs in the database, so
// every receiver process sharing it refuses a replayed signature. It
// implements signature.ReplayCache.
type ReplayCache struct{ s *Store }

// replayMargin is how long a pair is kept past the expiry its verifier
// gives: the verifier reads its own clock, the cache the Store's (the
// database server's, on PostgreSQL), and a pair the cache took for
// expired while a verifier whose clock runs behind still accepts the
// signature would let the same request in twice.
const replayMargin = 5 * time.Minute

// Remember records (keyID, nonce) until expires, and 5 minutes more: the
// receivers sharing the cache may read clocks up to that much behind the
// Store's (see Config.Now) and still never accept a pair twice. It reports
// replayed=true when the pair is already recorded and unexpired. A keyID
// or nonce that is not 1-256 bytes of UTF-8 without NUL is
// CodeInvalidArgument, with nothing recorded (an RFC 9421 verifier accepts
// none: its parameters are printable ASCII).
func (c *ReplayCache) Remember(ctx context.Context, keyID, nonce string, expires time.Time) (bool, error) {
	switch {
	case !validText(keyID, maxName):
		return false, invalidArgument("Remember keyID must be 1-256 bytes of UTF-8 without NUL")
	case !validText(nonce, maxName):
		return false, invalidArgument("Remember nonce must be 1-256 bytes of UTF-8 without NUL")
	}
	var inserted []string
	err := c.s.selectRows(ctx, c.s.writer, "replay_remember", map[string]any{
		"key_id": keyID, "nonce": nonce, "expires_at": expires.Add(replayMargin).UnixMicro(), "now": c.s.now(),
	}, &inserted)
	return len(inserted) == 0, err
}

// Prune deletes expired pairs in batches; see Inbox.Prune.
func (c *ReplayCache) Prune(ctx context.Context, p PruneParams) (int, error) {
	return c.s.prune(ctx, "replay_prune", map[string]any{"now": c.s.now()}, p)
}
