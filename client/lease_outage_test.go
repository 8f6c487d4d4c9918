package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/pgtest"
)

// TestLeasesThatExpireDuringALongOutageAreReclaimedOnceBack: the database
// goes away while several attempts are in flight, after the receiver
// applied them, and stays away longer than their leases. The worker
// cannot record their outcomes and gives up on each once its lease has
// passed; when the server is back the Run, which polls only hourly,
// reclaims the expired leases on its own as it listens again, sends each
// again, the receiver answers from its Inbox, and each delivery's attempts
// are logged once: the lease that expired, then the success.
//
// The attempts must still be in flight when the server has stopped: an
// attempt whose Timeout ran out while its answer was held (the server's
// stop is slow on a loaded machine) was recorded before the outage, and
// its lease never expired. And a delivery claimed again is sent only if
// its lease still covers a whole Timeout when its attempt starts; one
// given back waits for the next poll, an hour away. So the leases run out
// on a clock the store and the worker share, which stands still until the
// test moves it past them, once the server has stopped: neither the
// stop's length nor the machine's speed moves it, and the Timeout only
// bounds a failure.
func TestLeasesThatExpireDuringALongOutageAreReclaimedOnceBack(t *testing.T) {
	const n = 5
	const lease = 2 * time.Minute
	clock := newWorkerClock()
	o := setupOutage(t, clock, func(c *client.Config) {
		c.Timeout, c.Lease = time.Minute, lease // PollInterval stays an hour
	})
	hold := make(chan struct{})
	o.hold.Store(&hold)
	o.run(t)
	var ids []string
	for i := range n {
		id := fmt.Sprintf("held-%d", i)
		o.enqueue(t, id)
		ids = append(ids, id)
	}
	for range n {
		<-o.answered // applied and committed; the answer waits
	}
	if err := o.pg.Stop(pgtest.Fast); err != nil {
		t.Fatal(err)
	}
	clock.Advance(lease) // the outage outlasts the leases
	o.hold.Store(nil)
	close(hold)
	// Each settle is given up once its lease has passed: the outage
	// outlasts the leases.
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(o.logs.lines("worker: settle failed")) < n {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("settles given up: %d, want %d; logged: %+v", len(o.logs.lines("worker: settle failed")), n, lastLines(o.logs.lines(""), 10))
		}
	}
	if err := o.pg.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	pending := map[string]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	for len(pending) > 0 {
		select {
		case id := <-o.delivered:
			delete(pending, id)
		case <-time.After(20 * time.Second):
			t.Fatalf("not delivered within 20s of the server's return: %v; logged: %+v", pending, lastLines(o.logs.lines(""), 10))
		}
	}
	want := map[string]int{}
	for _, id := range ids {
		want[id] = 1
	}
	if got := o.applied(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	var logged []struct {
		Delivery int64  `db:"delivery_id"`
		Outcomes string `db:"outcomes"`
	}
	if err := o.db.SelectContext(t.Context(), &logged, `SELECT delivery_id, string_agg(attempt || ':' || outcome, ',' ORDER BY attempt) AS outcomes
		FROM courier_attempts GROUP BY delivery_id ORDER BY delivery_id`); err != nil {
		t.Fatal(err)
	}
	if len(logged) != n {
		t.Errorf("attempts logged for %d deliveries, want %d: %+v", len(logged), n, logged)
	}
	for _, l := range logged {
		if l.Outcomes != "1:lease_expired,2:succeeded" {
			t.Errorf("delivery %d logged attempts %s, want 1:lease_expired,2:succeeded", l.Delivery, l.Outcomes)
		}
	}
}
