package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/store"
)

// TestRunClaimsForRoomGivenBackSinceItsLastClaim: a Run at an endpoint's
// share waits for room the endpoint's attempts give back before it claims
// again, and room an attempt gave back before a claim was counted by that
// claim. The Run counted attempts that ended, and an attempt ends a
// moment after its settle commits: those whose settle the claim already
// saw ended during it, and the Run claimed again at once for room it had
// taken, leasing nothing. With one endpoint's backlog, about every other
// claim was such a claim: a write transaction of the database's one writer
// on SQLite, seven round trips on PostgreSQL, for nothing.
func TestRunClaimsForRoomGivenBackSinceItsLastClaim(t *testing.T) {
	t.Parallel()
	var b *workerBundle
	b = setupWorker(t, ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() }), func(c *client.Config) {
		c.Concurrency = 8 // a share of 4 for the one endpoint
	})
	const n = 400
	tx, err := b.store.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range n {
		if _, err := b.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{
			NotificationID: fmt.Sprintf("n-%d", i), Endpoint: b.server.URL + "/hooks", Payload: []byte(`{}`),
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	var claims, empty atomic.Int64
	client.SetClaimed(b.worker, func(leased int) {
		claims.Add(1)
		if leased == 0 {
			empty.Add(1)
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- b.worker.Run(ctx) }()
	for range n {
		if e := <-b.events; e.Status != courier.StatusSucceeded {
			t.Fatalf("event %+v, want succeeded", e)
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run = %v", err)
	}
	// A settle that committed just before a claim's transaction began, and
	// was counted just after, is counted as room the next claim has, so a
	// claim that leases nothing still comes now and then, and one at the
	// end, when nothing is left: up to about one for every twenty-five
	// deliveries with -race on a loaded machine, against one for every
	// four to six when the Run counted attempts that ended.
	if c, e := claims.Load(), empty.Load(); e > n/10 {
		t.Errorf("%d of the Run's %d claims leased nothing, for %d deliveries due to one endpoint; want at most %d", e, c, n, n/10)
	}
}
