package signature

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/courier-go/courier"
)

// TestMemoryReplayCacheAtCap: a key at its cap is refused until one of its
// nonces expires, whichever it is and in whatever order the nonces came,
// then admits one new nonce per one expired; a refused nonce is not
// recorded, a live one is still a replay, an expired one is new again.
func TestMemoryReplayCacheAtCap(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	now := start
	c := &memoryReplayCache{Now: func() time.Time { return now }, MaxPerKey: 3}
	at := func(d time.Duration) time.Time { return start.Add(d) }
	type step struct {
		clock    time.Duration // now, from start
		nonce    string
		expires  time.Duration // from start
		replayed bool
		err      error
	}
	steps := []step{
		// The last nonce to come expires first.
		{0, "a", 10 * time.Second, false, nil},
		{0, "b", 20 * time.Second, false, nil},
		{0, "c", 5 * time.Second, false, nil},
		{0, "d", time.Minute, false, courier.CodeWebhookRateAbuse},
		{0, "c", time.Minute, true, nil},
		{4 * time.Second, "d", time.Minute, false, courier.CodeWebhookRateAbuse},
		// c expires at 5s: room for one, and one only.
		{5 * time.Second, "d", time.Minute, false, nil},
		{5 * time.Second, "e", time.Minute, false, courier.CodeWebhookRateAbuse},
		{5 * time.Second, "d", time.Minute, true, nil},
		{9 * time.Second, "e", time.Minute, false, courier.CodeWebhookRateAbuse},
		// a expires at 10s; e was refused, so it is new.
		{10 * time.Second, "e", 30 * time.Second, false, nil},
		{15 * time.Second, "f", time.Minute, false, courier.CodeWebhookRateAbuse},
		// b expires at 20s; a, expired, is new again.
		{20 * time.Second, "a", time.Minute, false, nil},
		{25 * time.Second, "g", time.Minute, false, courier.CodeWebhookRateAbuse},
		// e expires at 30s, then d, e and a together at a minute.
		{30 * time.Second, "g", time.Minute, false, nil},
		{59 * time.Second, "h", 2 * time.Minute, false, courier.CodeWebhookRateAbuse},
		{time.Minute, "h", 2 * time.Minute, false, nil},
		{time.Minute, "i", 2 * time.Minute, false, nil},
		{time.Minute, "j", 2 * time.Minute, false, nil},
		{time.Minute, "k", 2 * time.Minute, false, courier.CodeWebhookRateAbuse},
	}
	ctx := context.Background()
	for i, s := range steps {
		now = at(s.clock)
		replayed, err := c.Remember(ctx, "k", s.nonce, at(s.expires))
		if replayed != s.replayed || !errors.Is(err, s.err) {
			t.Fatalf("step %d, at %v: Remember(%s) = %v, %v; want %v, %v", i, s.clock, s.nonce, replayed, err, s.replayed, s.err)
		}
	}
	// Another key is not held by this one's cap.
	if replayed, err := c.Remember(ctx, "other", "k", at(2*time.Minute)); replayed || err != nil {
		t.Fatalf("another key: %v, %v", replayed, err)
	}
	if got := c.Len(); got != 4 { // h, i, j, and the other key's
		t.Errorf("Len = %d, want 4", got)
	}
	now = at(2 * time.Minute)
	if got := c.Len(); got != 0 {
		t.Errorf("Len once all expired = %d, want 0", got)
	}
}

// BenchmarkMemoryReplayAtCap measures the refusal of a key that holds its
// cap of live nonces, none of them expired, at two caps.
func BenchmarkMemoryReplayAtCap(b *testing.B) {
	for _, limit := range []int{10_000, 1_000_000} {
		b.Run("cap="+strconv.Itoa(limit), func(b *testing.B) {
			now := time.Unix(1_700_000_000, 0)
			c := &memoryReplayCache{Now: func() time.Time { return now }, MaxPerKey: limit}
			ctx := context.Background()
			until := now.Add(10 * time.Minute)
			for i := range limit {
				if _, err := c.Remember(ctx, "k", "n"+strconv.Itoa(i), until); err != nil {
					b.Fatal(err)
				}
			}
			i := 0
			for b.Loop() {
				i++
				if _, err := c.Remember(ctx, "k", "x"+strconv.Itoa(i), until); !errors.Is(err, courier.CodeWebhookRateAbuse) {
					b.Fatalf("Remember at the cap = %v, want rate abuse", err)
				}
			}
		})
	}
}

// TestMemoryReplayCacheForgetsKeysWhoseNoncesExpired: a receiver that
// runs for months sees ever more key ids (keys rotated, senders come and
// gone), each with nonces of its own. A key's entry goes once its nonces
// have expired, swept as Remember goes on, without a call to Len: the
// cache holds the keys of the last few minutes, not of all time.
func TestMemoryReplayCacheForgetsKeysWhoseNoncesExpired(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	c := &memoryReplayCache{Now: func() time.Time { return now }}
	ctx := context.Background()
	const keys = 10_000
	for i := range keys {
		if _, err := c.Remember(ctx, "key-"+strconv.Itoa(i), "n", now.Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(10 * time.Minute)
	for i := range memoryPruneEvery {
		if _, err := c.Remember(ctx, "live", strconv.Itoa(i), now.Add(5*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	held := len(c.keys)
	c.mu.Unlock()
	if held != 1 {
		t.Errorf("%d keys held after %d expired, want the live one alone", held, keys)
	}
}

// Len returns how many unexpired pairs the cache holds.
func (c *memoryReplayCache) Len() int {
	now := nowFunc(c.Now)()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneLocked(now)
	n := 0
	for _, k := range c.keys {
		n += len(k.expiry)
	}
	return n
}
