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
// window here ends only once the claim has returned.
func TestAClaimWhoseContextEndsAsItCommitsIsReturned(t *testing.T) {
	t.Parallel()
	c := cutClaimAsItCommits(t)
	c.gate.Open(t)
	got := <-c.done
	if got.err != nil || !got.r.Fresh || got.c.Key != c.key {
		t.Fatalf("Claim whose context ended as it committed, once committed = %+v, %+v, %v; want the claim, fresh", got.r, got.c, got.err)
	}
	if err := c.in.ReleaseClaim(t.Context(), got.c); err != nil {
		t.Fatal(err)
	}
	if r, _, err := c.in.Claim(t.Context(), c.key, time.Minute); err != nil || !r.Fresh {
		t.Fatalf("Claim after the claim was given back = %+v, %v; want it fresh", r, err)
	}
}

// TestAClaimWhoseCommitHangsIsGivenUpOnceItsWindowEnds: the COMMIT of a
// claim whose context ended runs on, but not for ever: one that hangs on
// the server (a synchronous standby away, say) is given up once its
// window ends (claimCommitWindow after the context ended), and Claim
// fails, where it held its caller (a receiver's request) and its
// connection of the pool until the database answered, however long that
// took.
func TestAClaimWhoseCommitHangsIsGivenUpOnceItsWindowEnds(t *testing.T) {
	t.Parallel()
	c := cutClaimAsItCommits(t)
	defer c.gate.Open(t)
	close(c.end)
	select {
	case got := <-c.done:
		if got.err == nil {
			t.Fatalf("Claim whose COMMIT hangs, its window ended = %+v, nil; want it failed", got.r)
		}
	case <-time.After(time.Minute): // a bound on failure: the COMMIT is held until the test opens the gate
		c.gate.Open(t)
		<-c.done
		t.Fatal("Claim whose COMMIT hangs has not returned after its window ended")
	}
}

// claimCut is an inbox claim on PostgreSQL whose context ended while its
// COMMIT was held on the server.
type claimCut struct {
	in   protocol.Inbox
	key  protocol.InboxKey
	gate *pgtest.CommitGate // holds the claim's COMMIT until opened
	end  chan time.Time     // closed, it ends the window the COMMIT runs on in
	done <-chan claimed     // what Claim returned
}

// claimed is what an inbox claim returned.
type claimed struct {
	r   protocol.Receipt
	c   protocol.InboxClaim
	err error
}

// cutClaimAsItCommits claims a key on a PostgreSQL Store and, once the
// claim's COMMIT is held on the server, ends the claim's context, as a
// client that goes away does. It returns once the window the COMMIT runs
// on in has begun, and fails t if Claim returned first, its COMMIT still
// held: the driver gave the COMMIT up with the context.
func cutClaimAsItCommits(t *testing.T) claimCut {
	t.Helper()
	s := setupClock(t).open(t, store.Config{}, time.Now)
	windows, end := make(chan struct{}, 1), make(chan time.Time)
	store.SetClaimCommitWindow(s, func() <-chan time.Time {
		windows <- struct{}{}
		return end
	})
	c := claimCut{end: end}
	c.gate = pgtest.HoldCommits(t, s.DB().DB, "courier_inbox")
	c.in = protocol.InboxFor(s)
	c.key = protocol.InboxKey{Sender: "sender", Key: "n-1", PayloadSHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan claimed, 1)
	c.done = done
	go func() {
		r, claim, err := c.in.Claim(ctx, c.key, time.Minute)
		done <- claimed{r, claim, err}
	}()
	c.gate.WaitHeld(t)
	cancel()
	select {
	case got := <-done:
		c.gate.Open(t)
		t.Fatalf("Claim whose context ended as it committed returned %+v, %v with its COMMIT still held; want it to wait for the COMMIT", got.r, got.err)
	case <-windows:
	}
	return c
}
