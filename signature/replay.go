package signature

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"sync"
	"time"

	"github.com/courier-go/courier"
)

// ReplayCache remembers (keyID, nonce) pairs; the store implements it in a
// database table so every process shares it.
//
// The keyID an RFC 9421 verifier passes is not the signature's bare keyid
// but names the signer: "rfc9421:" and 64 hex digits of the SHA-256 of the
// verifier's Sender and the keyid, each prefixed by its length. Key ids
// are each sender's own choice, so two senders may both name a key "k1";
// qualified by Sender, the verifiers of several senders sharing one cache
// neither take one sender's nonce for a replay of the other's nor count
// one sender's nonces against the other's cap. (Versions of courier
// before this one passed the bare keyid, and their pairs are not found
// under the new key: a request accepted before the upgrade, or by a
// process of the old version during a rolling upgrade, and replayed to
// one of the new within its validity window of a few minutes, passes
// once more. The old pairs expire and are pruned as before.)
type ReplayCache interface {
	// Remember records (keyID, nonce) until expires. It returns replayed=true
	// (and no error) if the pair was already recorded and has not expired.
	// A cache that caps the live nonces of one key returns
	// courier.CodeWebhookRateAbuse, instead of recording a new pair, when
	// keyID already holds its cap: a signer that mints nonces faster than
	// they expire is compromised or broken, and the RFC 9421 verifier
	// rejects its requests with that code (answered 429 with Retry-After
	// by middleware.Verify and package handler's receivers: the key's
	// requests are accepted again as its nonces expire). keyID is opaque
	// to the cache, at most 256 bytes; the RFC 9421 verifier passes the
	// 72-byte qualified key described above.
	Remember(ctx context.Context, keyID, nonce string, expires time.Time) (replayed bool, err error)
}

// replayKeyID is the keyID under which the RFC 9421 verifier of sender
// records the nonces of the signature keyid keyID: "rfc9421:" and the hex
// SHA-256 of sender and keyID, each prefixed by its length (8 bytes, big
// endian), so that no two (sender, keyid) pairs share one, and 72 bytes of
// ASCII however long they are (a store keeps up to 256).
func replayKeyID(sender, keyID string) string {
	h := sha256.New()
	var n [8]byte
	for _, s := range [...]string{sender, keyID} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		io.WriteString(h, s)
	}
	return "rfc9421:" + hex.EncodeToString(h.Sum(nil))
}

// defaultMaxNoncesPerKey is memoryReplayCache's default cap of live nonces
// per key id, AdCP's production minimum.
const defaultMaxNoncesPerKey = 1_000_000

// memoryPruneEvery is how many Remember calls pass between sweeps of expired
// entries in a memoryReplayCache.
const memoryPruneEvery = 1024

// memoryReplayCache is a ReplayCache in the memory of one process, for tests
// and single-process receivers. It is safe for concurrent use and drops
// expired entries as it goes. A receiver with several processes needs the
// store's shared cache instead.
type memoryReplayCache struct {
	// Now is the clock entries expire by. Defaults to time.Now. Set it before
	// the first Remember.
	Now func() time.Time
	// MaxPerKey caps the live nonces of one key id (for the RFC 9421
	// verifier, of one Sender's keyid: see ReplayCache): past it Remember returns
	// courier.CodeWebhookRateAbuse. Defaults to 1,000,000; negative means
	// no cap. Set it before the first Remember.
	MaxPerKey int

	mu    sync.Mutex
	keys  map[string]*keyNonces
	calls int
}

// keyNonces are the nonces of one key id with their expiries, and a time
// before which none of them expires. Sweeping a key for expired nonces
// costs all of them, so it waits for that time: a key at its cap is then
// refused at once, not after a sweep that finds nothing, and is swept
// again only once a nonce may have expired.
type keyNonces struct {
	expiry   map[string]time.Time // nonce -> expiry
	earliest time.Time            // no nonce expires before it
}

// Remember implements ReplayCache.
func (c *memoryReplayCache) Remember(ctx context.Context, keyID, nonce string, expires time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := nowFunc(c.Now)()
	limit := c.MaxPerKey
	if limit == 0 {
		limit = defaultMaxNoncesPerKey
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = make(map[string]*keyNonces)
	}
	if c.calls++; c.calls%memoryPruneEvery == 0 {
		c.pruneLocked(now)
	}
	k := c.keys[keyID]
	if k == nil {
		k = &keyNonces{expiry: make(map[string]time.Time)}
		c.keys[keyID] = k
	} else if until, ok := k.expiry[nonce]; ok && now.Before(until) {
		return true, nil
	}
	if limit > 0 && len(k.expiry) >= limit {
		if k.prune(now); len(k.expiry) >= limit {
			return false, courier.CodeWebhookRateAbuse
		}
	}
	if len(k.expiry) == 0 || expires.Before(k.earliest) {
		k.earliest = expires
	}
	k.expiry[nonce] = expires
	return false, nil
}

func (c *memoryReplayCache) pruneLocked(now time.Time) {
	for id, k := range c.keys {
		if k.prune(now); len(k.expiry) == 0 {
			delete(c.keys, id)
		}
	}
}

// prune drops the nonces expired at now, if any may have, and moves
// earliest up to the first expiry of those left.
func (k *keyNonces) prune(now time.Time) {
	if now.Before(k.earliest) {
		return // none has expired
	}
	first := true
	for n, until := range k.expiry {
		switch {
		case !now.Before(until):
			delete(k.expiry, n)
		case first || until.Before(k.earliest):
			k.earliest, first = until, false
		}
	}
}
