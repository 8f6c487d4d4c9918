package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// TestAClaimWhoseContextEndsAsItCommitsIsReturned: on PostgreSQL, the
// context of an inbox claim (a Reporting receiver's request) ends while
// the claim's COMMIT is on the server. The driver gave the COMMIT up with
// the context and Claim failed, while the server committed the claim all
// the same: its receiver, told of none, gave none back, and every retry
// of the delivery was answered in progress until the claim went stale.
// The COMMIT now runs on, for a window that begins as the context ends,
// and Claim returns the committed claim, for its caller to give back. The
// window here ends only once the claim has returned: Claim returning
// before the window began, with the COMMIT held, is the driver giving it
// up.
func TestAClaimWhoseContextEndsAsItCommitsIsReturned(t *testing.T) {
	t.Parallel()
	s := setupClock(t).open(t, store.Config{}, time.Now)
	windows := make(chan struct{}, 1)
	store.SetClaimCommitWindow(s, func() <-chan time.Time {
		windows <- struct{}{}
		return nil // a window that does not end
	})
	gate := pgtest.HoldCommits(t, s.DB().DB, "courier_inbox")
	in := protocol.InboxFor(s)
	key := protocol.InboxKey{Sender: "sender", Key: "n-1", PayloadSHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	type claimed struct {
		r   protocol.Receipt
		c   protocol.InboxClaim
		err error
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan claimed, 1)
	go func() {
		r, c, err := in.Claim(ctx, key, time.Minute)
		done <- claimed{r, c, err}
	}()
	gate.WaitHeld(t)
	cancel()
	select {
	case got := <-done:
		gate.Open(t)
		t.Fatalf("Claim whose context ended as it committed returned %+v, %v with its COMMIT still held; want it to wait for the COMMIT", got.r, got.err)
	case <-windows:
	}
	gate.Open(t)
	got := <-done
	if got.err != nil || !got.r.Fresh || got.c.Key != key {
		t.Fatalf("Claim whose context ended as it committed, once committed = %+v, %+v, %v; want the claim, fresh", got.r, got.c, got.err)
	}
	if err := in.ReleaseClaim(t.Context(), got.c); err != nil {
		t.Fatal(err)
	}
	if r, _, err := in.Claim(t.Context(), key, time.Minute); err != nil || !r.Fresh {
		t.Fatalf("Claim after the claim was given back = %+v, %v; want it fresh", r, err)
	}
}
