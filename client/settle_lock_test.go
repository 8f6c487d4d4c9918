package client_test

import (
	"encoding/json"
	"fmt"
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

// TestWorkerSettlesAroundRowsAnotherTransactionHolds: seven notifications
// are at the receiver at once when a transaction outside courier (an
// operator's SELECT ... FOR UPDATE in psql) takes the rows of two of
// them, first and held, and keeps them. The receiver answers first; the
// worker's settle of it waits for its row, and the other six answers
// queue behind that settle (the worker settles one transaction at a
// time) and are settled together next, held among them. While the rows
// are still held the five others are recorded succeeded, and first and
// held stay leased: only their own outcomes wait. Once the transaction
// ends both are recorded succeeded, each notification having been sent
// once.
func TestWorkerSettlesAroundRowsAnotherTransactionHolds(t *testing.T) {
	t.Parallel()
	names := []string{"first", "held", "n0", "n1", "n2", "n3", "n4"}
	var mu sync.Mutex
	seen := make(map[string]int) // notification -> requests the receiver saw
	arrived := newCountdown(len(names))
	answer := make(map[string]chan struct{}, len(names)) // closed: the receiver answers the notification
	for _, n := range names {
		answer[n] = make(chan struct{})
	}
	answerFirst := sync.OnceFunc(func() { close(answer[names[0]]) })
	answerOthers := sync.OnceFunc(func() {
		for _, n := range names[1:] {
			close(answer[n])
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n struct{ ID string }
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil || answer[n.ID] == nil {
			http.Error(w, "not a notification of the test", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen[n.ID]++
		mu.Unlock()
		arrived.hit()
		select {
		case <-answer[n.ID]:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { answerFirst(); answerOthers() }) // before srv.Close, which waits for the handlers

	s := couriertest.PostgresStores(t, 1, store.Config{})[0]
	w, err := client.NewWorker(client.Config{
		Store: s, Owner: "worker", Signer: couriertest.StandardWebhooksKeys("sender").Signer,
		Transport: couriertest.Guard(srv.URL).Transport(), PollInterval: 10 * time.Millisecond,
		Concurrency: len(names), EndpointConcurrency: len(names),
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := make(map[string]int64, len(names))
	for _, n := range names {
		p := plain(srv.URL, n)
		p.Payload = fmt.Appendf(nil, `{"id":%q}`, n)
		ids[n] = enqueueOne(t, s, p)
	}
	runWorker(t, w)
	waitFor(t, arrived.done, "every notification at the receiver")

	operator, err := s.DB().BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { operator.Rollback() })
	if _, err := operator.Exec(`SELECT 1 FROM courier_outbox WHERE id IN ($1, $2) FOR UPDATE`, ids["first"], ids["held"]); err != nil {
		t.Fatal(err)
	}
	answerFirst()
	eventually(t, "the worker's settle of first waiting for its row", func() bool {
		var waiting int
		err := s.DB().Get(&waiting, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
		return err == nil && waiting > 0
	})
	answerOthers()

	status := func(n string) courier.Status {
		d, err := s.Outbox.Get(t.Context(), ids[n])
		if err != nil {
			t.Fatal(err)
		}
		return d.Status
	}
	eventually(t, "the five others succeeded while the rows are held", func() bool {
		for _, n := range names[2:] {
			if status(n) != courier.StatusSucceeded {
				return false
			}
		}
		return true
	})
	for _, n := range names[:2] {
		if got := status(n); got != courier.StatusLeased {
			t.Fatalf("%s while its row is held: %s, want leased", n, got)
		}
	}

	if err := operator.Rollback(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "first and held succeeded once their rows are free", func() bool {
		return status("first") == courier.StatusSucceeded && status("held") == courier.StatusSucceeded
	})
	mu.Lock()
	defer mu.Unlock()
	for _, n := range names {
		if seen[n] != 1 {
			t.Errorf("the receiver saw %s %d times, want once", n, seen[n])
		}
	}
}

// enqueueOne enqueues p in a transaction of its own and returns its
// delivery's id.
func enqueueOne(t *testing.T, s *store.Store, p store.EnqueueParams) int64 {
	t.Helper()
	tx, err := s.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	e, err := s.Outbox.Enqueue(t.Context(), tx, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// eventually polls cond, which reads the database, until it holds,
// failing the test after 30 seconds: long past what the worker needs, and
// short of go test's own timeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("gave up waiting for %s", what)
		case <-tick.C:
		}
	}
}
