package client_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
)

// TestWorkersOnSkewedHostsKeepLeasesLimitsAndOrder: three workers in three
// processes on one PostgreSQL database, their hosts' clocks three minutes
// behind, right and three minutes ahead (within the receiver's five
// minutes of signature tolerance), on leases far shorter than the skew
// (30 s, long enough that a loaded machine's attempt and settle fit in
// one: a lease that runs out sends its delivery again), deliver 30
// deliveries over three ordering keys, a first attempt of every fifth
// refused 503, to an endpoint allowed 2 in flight. The Stores stamp on
// the database's clock and the workers measure their leases as spans, so
// the skew changes nothing: each is accepted once, a key's one at a time
// and in enqueue order, never more than 2 at the receiver at once.
func TestWorkersOnSkewedHostsKeepLeasesLimitsAndOrder(t *testing.T) {
	t.Parallel()
	const keysN, perKey, limit = 3, 10, 2
	keys := couriertest.StandardWebhooksKeys("sender")
	var g gauge
	done := newCountdown(keysN * perKey)
	var mu sync.Mutex
	inFlight := make(map[int]bool)   // key -> one of its deliveries is at the receiver
	next := make(map[int]int)        // key -> the seq it accepts next
	refused := make(map[string]bool) // ids refused once
	accepted := make(map[string]int) // id -> times accepted
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.enter()
		defer g.leave()
		id := r.Header.Get("webhook-id")
		var key, seq int
		if _, err := fmt.Sscanf(id, "k%d-s%d", &key, &seq); err != nil {
			t.Errorf("id %q: %v", id, err)
			return
		}
		mu.Lock()
		if inFlight[key] {
			t.Errorf("two deliveries of key %d at the receiver at once", key)
		}
		inFlight[key] = true
		mu.Unlock()
		defer func() { // before the answer leaves
			mu.Lock()
			inFlight[key] = false
			mu.Unlock()
		}()
		body, _ := io.ReadAll(r.Body)
		if _, err := keys.Verifier.Verify(r.Context(), r, body); err != nil {
			t.Errorf("signature refused: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if seq != next[key] {
			t.Errorf("key %d: %s arrived when seq %d was next", key, id, next[key])
		}
		if seq%5 == 0 && !refused[id] {
			refused[id] = true
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		accepted[id]++
		next[key] = seq + 1
	}))
	t.Cleanup(srv.Close)

	stores := couriertest.PostgresStores(t, 3, noBreaker)
	if err := stores[0].Endpoints.SetLimits(t.Context(), srv.URL, store.Limits{MaxInFlight: limit}); err != nil {
		t.Fatal(err)
	}
	var ps []store.EnqueueParams
	for seq := range perKey {
		for key := range keysN {
			p := plain(srv.URL, fmt.Sprintf("k%d-s%02d", key, seq))
			p.OrderingKey = fmt.Sprint("key-", key)
			ps = append(ps, p)
		}
	}
	enqueueAll(t, stores[0], ps...)
	for i, skew := range []time.Duration{-3 * time.Minute, 0, 3 * time.Minute} {
		w, err := client.NewWorker(client.Config{
			Store: stores[i], Owner: fmt.Sprintf("worker-%d", i), Signer: keys.Signer, Transport: couriertest.Guard(srv.URL).Transport(),
			Concurrency: 4, EndpointConcurrency: 4, PollInterval: 10 * time.Millisecond,
			Lease: 30 * time.Second, Timeout: 10 * time.Second,
			Backoff: func(int, time.Duration) time.Duration { return 0 },
			Now:     func() time.Time { return time.Now().Add(skew) },
			Hook: func(e client.Event) {
				if e.Status == courier.StatusSucceeded {
					done.hit()
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
	}
	waitFor(t, done.done, "every delivery")
	mu.Lock()
	defer mu.Unlock()
	for _, p := range ps {
		if n := accepted[p.NotificationID]; n != 1 {
			t.Errorf("%s accepted %d times, want once", p.NotificationID, n)
		}
	}
	if peak := g.peak.Load(); peak > limit {
		t.Fatalf("the receiver saw %d requests at once, over MaxInFlight %d", peak, limit)
	}
}
