package client_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/testserver"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestPruneDuringDeliveryRun prunes both ends' tables over and over, in
// small batches, while a worker delivers: no batch is larger than
// configured, nothing unfinished is pruned (every notification is still
// delivered and processed exactly once), and what is finished goes.
func TestPruneDuringDeliveryRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	sender, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sender.Close() })
	receiver, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { receiver.Close() })
	key, _ := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	signer, _ := signature.NewStandardWebhooksSigner(key)
	verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "s", Keys: []signature.StandardWebhooksKey{key}})
	srv, err := testserver.New(testserver.Config{Store: receiver, Verifier: verifier})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)

	const n, batch = 150, 7
	var ids []string
	delivered := make(chan struct{}, n)
	w, err := client.NewWorker(client.Config{Store: sender, Signer: signer, Transport: loopbackGuard(t, srv.URL).Transport(), Concurrency: 4, BatchSize: 4,
		Backoff: client.ExponentialBackoff(time.Millisecond, time.Millisecond, 0),
		Hook: func(e client.Event) {
			if e.Status == courier.StatusSucceeded {
				delivered <- struct{}{}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(runCtx) })

	var mu sync.Mutex
	largest, pruned := 0, 0
	onBatch := func(deleted int) {
		mu.Lock()
		largest, pruned = max(largest, deleted), pruned+deleted
		mu.Unlock()
	}
	pruneOnce := func() {
		// The shortest retention: every record finished before this
		// microsecond goes.
		p := store.PruneParams{OlderThan: time.Microsecond, BatchSize: batch, OnBatch: onBatch}
		if _, err := sender.Outbox.Prune(ctx, p); err != nil {
			t.Error(err)
		}
		if _, err := sender.Outbox.PruneAttempts(ctx, store.PruneParams{OlderThan: time.Microsecond, BatchSize: batch}); err != nil {
			t.Error(err)
		}
	}
	for i := range n {
		note, payload := terminalNotification(t, i)
		ids = append(ids, note.NotificationID)
		tx, _ := sender.DB().BeginTxx(ctx, nil)
		if _, err := sender.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: note.NotificationID, Endpoint: srv.URL + "/terminal", Payload: payload, Profile: ack.ProfileTerminal}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			pruneOnce()
		}
	}
	for range n {
		<-delivered
		pruneOnce()
	}
	stop()
	wg.Wait()
	pruneOnce()

	effects, err := srv.Effects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if effects[id] != 1 {
			t.Fatalf("%s processed %d times", id, effects[id])
		}
	}
	h, _ := sender.Outbox.Health(ctx)
	mu.Lock()
	defer mu.Unlock()
	if largest > batch || largest == 0 {
		t.Fatalf("largest batch %d, configured %d", largest, batch)
	}
	if pruned != n || h.Counts[courier.StatusSucceeded] != 0 {
		t.Fatalf("pruned %d of %d succeeded deliveries, %d left", pruned, n, h.Counts[courier.StatusSucceeded])
	}
	// The receiver's dedupe records go the same way, a day later (the
	// inbox keeps records at least a day): another process's Store, its
	// clock a day ahead, prunes them.
	later, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{Now: func() time.Time { return time.Now().Add(24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { later.Close() })
	got, err := later.Inbox.Prune(ctx, store.PruneParams{OlderThan: 24 * time.Hour, BatchSize: batch})
	if err != nil || got != n {
		t.Fatalf("inbox Prune = %d, %v", got, err)
	}
}
