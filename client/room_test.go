package client_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
)

// TestRunGetsTheRoomAnAttemptOfWorkFrees: the slots and the fair share of
// a Worker are shared by its Runs and Works, so an attempt of Work's that
// ends frees room for a Run waiting for it. Only Run's own attempts told
// it: a Run of a one-slot worker whose slot a Work held went on waiting
// after the Work's attempt ended, for its next poll (an hour here), with
// a delivery due.
func TestRunGetsTheRoomAnAttemptOfWorkFrees(t *testing.T) {
	t.Parallel()
	requests := make(chan string, 10)
	hold := make(chan struct{})
	letGo := sync.OnceFunc(func() { close(hold) })
	var b *workerBundle
	answer := ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() })
	b = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		requests <- id
		if id == "n-1" {
			<-hold
		}
		answer(w, r)
	}, func(c *client.Config) { c.Concurrency, c.EndpointConcurrency, c.PollInterval = 1, 1, time.Hour })
	t.Cleanup(letGo) // before the server closes, which waits for its handlers
	b.enqueue(t, "n-1", `{}`)
	b.enqueue(t, "n-2", `{}`)

	worked := make(chan error, 1)
	go func() {
		_, err := b.worker.Work(context.WithoutCancel(t.Context()))
		worked <- err
	}()
	if id := <-requests; id != "n-1" {
		t.Fatalf("Work sent %s first, want n-1", id)
	}

	waiting := make(chan struct{}, 100)
	client.SetAwaiting(b.worker, func() { waiting <- struct{}{} })
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- b.worker.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	select { // the Work's attempt holds the one slot: Run waits for room
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not begin to wait within 10s")
	}

	letGo()
	if err := <-worked; err != nil {
		t.Fatalf("Work = %v", err)
	}
	select {
	case id := <-requests:
		if id != "n-2" {
			t.Fatalf("Run sent %s, want n-2", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("n-2 not sent within 10s of the Work's attempt ending (PollInterval 1h): Run was not told of the room")
	}
}
