package client

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestSettlerGroupsOutcomes: outcomes that arrive while a settle
// transaction waits are settled together in the next one, each caller gets
// its own result, and a lost lease in the batch fails only its own outcome.
func TestSettlerGroupsOutcomes(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 12
	tx, err := s.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
			NotificationID: fmt.Sprintf("n%02d", i), Endpoint: "https://example.com/hook", Payload: []byte(`{}`),
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	claimed, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: n, Lease: time.Minute})
	if err != nil || len(claimed) != n {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}

	// The first settle runs alone and waits for the writer, held by a
	// transaction of the test's; the others queue behind it.
	var mu sync.Mutex
	var batches []int
	st := &settler{apply: func(ctx context.Context, ocs ...protocol.Outcome) ([]protocol.Settled, error) {
		mu.Lock()
		batches = append(batches, len(ocs))
		mu.Unlock()
		return protocol.For(s).Settle(ctx, ocs...)
	}}
	hold, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		i   int
		st  protocol.Settled
		err error
	}
	results := make(chan result, n)
	settle := func(i int) {
		oc := protocol.Outcome{Lease: claimed[i].Lease, Result: protocol.Succeeded}
		if i == n-1 {
			oc.Lease.Token = "not-the-token"
		}
		got, err := st.settle(ctx, oc)
		results <- result{i, got, err}
	}
	go settle(0)
	waitFor(t, func() bool { st.mu.Lock(); defer st.mu.Unlock(); return st.running && len(st.queue) == 0 })
	for i := 1; i < n; i++ {
		go settle(i)
	}
	waitFor(t, func() bool { st.mu.Lock(); defer st.mu.Unlock(); return len(st.queue) == n-1 })
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}

	for range n {
		r := <-results
		switch {
		case r.err != nil:
			t.Errorf("outcome %d: %v", r.i, r.err)
		case r.i == n-1:
			if !errors.Is(r.st.Err, courier.ErrLeaseLost) {
				t.Errorf("outcome with a wrong token: %+v, want lease lost", r.st)
			}
		case r.st.Err != nil || r.st.Status != courier.StatusSucceeded:
			t.Errorf("outcome %d: %+v, want succeeded", r.i, r.st)
		}
	}
	if len(batches) != 2 || batches[0] != 1 || batches[1] != n-1 {
		t.Errorf("settle transactions of %v outcomes, want [1 %d]", batches, n-1)
	}
	for i, c := range claimed[:n-1] {
		d, err := s.Outbox.Get(ctx, c.DeliveryID)
		if err != nil || d.Status != courier.StatusSucceeded {
			t.Errorf("delivery %d: %+v, %v", i, d.Status, err)
		}
	}
}

// waitFor polls cond until it holds, yielding between tries.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
