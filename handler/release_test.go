package handler

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestUnreleasedKeepsTheNewestClaims: a receiver that runs for months
// meets the database going away now and then, and remembers each claim
// it could not give back, which the key's retry gives back first. Most
// such keys never come back to it: their retries reached another process
// of the receiver, or came after StaleAfter and took the claim over. A
// receiver that had remembered maxUnreleased of them remembered no claim
// after, for good: the retry of the newest found its key in progress
// (503) until the claim went stale. The oldest are forgotten first.
func TestUnreleasedKeepsTheNewestClaims(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	inbox := protocol.InboxFor(s)
	var u unreleased
	// Claims whose keys never come back here: long taken over elsewhere,
	// their records completed and pruned since.
	for i := range 3 * maxUnreleased {
		u.add(protocol.InboxClaim{Key: protocol.InboxKey{Sender: "seller", Key: fmt.Sprintf("gone-%d", i)}, Token: int64(i + 1)})
	}
	if n := len(u.claims); n > maxUnreleased {
		t.Fatalf("%d claims remembered, want at most %d", n, maxUnreleased)
	}

	key := protocol.InboxKey{Sender: "seller", Key: "newest", PayloadSHA256: ack.Digest([]byte(`{}`))}
	_, claim, err := inbox.Claim(t.Context(), key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	u.add(claim) // as giveBack does when the release failed throughout
	receipt, _, err := inbox.Claim(t.Context(), key, time.Hour)
	if err != nil || !receipt.InProgress {
		t.Fatalf("the retry's claim = %+v, %v; want the key in progress", receipt, err)
	}
	if !u.releaseRemembered(t.Context(), inbox, key) {
		t.Fatal("the newest claim not given back by its key's retry: it was not remembered")
	}
	if receipt, _, err := inbox.Claim(t.Context(), key, time.Hour); err != nil || !receipt.Fresh {
		t.Fatalf("the retry's claim after the give-back = %+v, %v; want it fresh", receipt, err)
	}
	if n := len(u.claims); n > maxUnreleased {
		t.Fatalf("%d claims remembered, want at most %d", n, maxUnreleased)
	}
}
