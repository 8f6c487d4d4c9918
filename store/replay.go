package store

import (
	"context"
	"time"

	"github.com/courier-go/courier"
)

// ReplayCache remembers signature (key id, nonce) pairs in the database, so
// every receiver process sharing it refuses a replayed signature. It
// implements signature.ReplayCache. The key id is whatever the caller
// passes: signature's RFC 9421 verifier passes a digest of its Sender and
// the signature's keyid (see signature.ReplayCache), so the pairs and the
// cap below are per sender and key, and senders that name their keys
// alike do not share them.
//
// Like the in-memory cache, it caps the live nonces of one key id at
// 1,000,000 (AdCP's production minimum): past it Remember records
// nothing and returns courier.CodeWebhookRateAbuse, so a signer minting
// nonces faster than they expire is refused rather than let grow the
// table without bound. The count is kept per minute of expiry, so a pair
// counts until the end of the minute it expires in.
type ReplayCache struct{ s *Store }

// maxNoncesPerKey is the cap of live nonces per key id.
const maxNoncesPerKey = 1_000_000

// replayBucket is the span of a replay count: pairs are counted per minute
// of expiry (the migration's triggers divide by it too).
const replayBucket = time.Minute

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
// none: its parameters are printable ASCII). A new pair for a key id that
// holds its cap of live ones is courier.CodeWebhookRateAbuse, with
// nothing recorded.
func (c *ReplayCache) Remember(ctx context.Context, keyID, nonce string, expires time.Time) (bool, error) {
	switch {
	case !validText(keyID, maxName):
		return false, invalidArgument("Remember keyID must be 1-256 bytes of UTF-8 without NUL")
	case !validText(nonce, maxName):
		return false, invalidArgument("Remember nonce must be 1-256 bytes of UTF-8 without NUL")
	}
	now := c.s.now()
	args := map[string]any{
		"key_id": keyID, "nonce": nonce, "expires_at": expires.Add(replayMargin).UnixMicro(), "now": now,
		"live_bucket": liveBucket(now), "cap": maxNoncesPerKey,
	}
	res, err := c.s.exec(ctx, c.s.writer, "replay_remember", args)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 { // recorded
		return false, wrapf(err, "replay_remember")
	}
	var replayed []int
	if err := c.s.selectRows(ctx, c.s.writer, "replay_refused", args, &replayed); err != nil {
		return false, err
	}
	if len(replayed) == 0 || replayed[0] == 0 {
		return false, courier.CodeWebhookRateAbuse
	}
	return true, nil
}

// liveBucket is the first minute of expiry whose count may hold live pairs
// at now (unix microseconds): a pair is stored to expire replayMargin past
// its verifier's expiry, and counted in the minute it is stored to expire.
func liveBucket(now int64) int64 {
	return (now + replayMargin.Microseconds()) / replayBucket.Microseconds()
}

// Prune deletes expired pairs, then the counts of the minutes whose pairs
// have all expired, each in bounded batches; see Inbox.Prune. A pair's
// age is its own expiry, so p.OlderThan does not change what it deletes
// (a negative one is refused all the same). It returns the pairs and
// counts it deleted, which MaxRows bounds together.
func (c *ReplayCache) Prune(ctx context.Context, p PruneParams) (int, error) {
	return c.prune(ctx, c.s.prune, p)
}

// prune is Prune, each statement run by run.
func (c *ReplayCache) prune(ctx context.Context, run pruner, p PruneParams) (int, error) {
	now := c.s.now()
	n, err := run(ctx, "replay_prune", map[string]any{"now": now}, p)
	if err != nil || (p.MaxRows > 0 && n >= p.MaxRows) {
		return n, err
	}
	if p.MaxRows > 0 {
		p.MaxRows -= n
	}
	m, err := run(ctx, "replay_prune_counts", map[string]any{"live_bucket": liveBucket(now)}, p)
	return n + m, err
}
