package client_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestWorkerVerifiesWithTheStoresProfiles: a custom profile is registered
// once, in store.Config.Profiles, and the Store's workers verify each
// answer with it: an answer the profile accepts succeeds, one it refuses
// fails with ack_invalid.
func TestWorkerVerifiesWithTheStoresProfiles(t *testing.T) {
	t.Parallel()
	echo := ack.Profile{Name: "echo.v1", Verify: func(sent ack.Sent, response []byte) error {
		if string(response) != "got "+sent.ID {
			return fmt.Errorf("%w: the answer does not name the notification", courier.CodeAckInvalid)
		}
		return nil
	}}
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{
		Profiles: func(name string) (ack.Profile, bool) {
			if name == echo.Name {
				return echo, true
			}
			return ack.Builtin(name)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get("webhook-id")
		if id == "n-wrong" {
			id = "someone else"
		}
		io.WriteString(w, "got "+id)
	}))
	t.Cleanup(srv.Close)
	signer := newSigner(t)
	w, err := client.NewWorker(client.Config{
		Store: s, Signer: signer, Transport: loopbackGuard(t, srv.URL).Transport(),
		Timeout: 2 * time.Second, Lease: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Delivery{
		"n-right": {Status: courier.StatusSucceeded},
		"n-wrong": {Status: courier.StatusFailed, LastErrorCode: courier.CodeAckInvalid},
	}
	ids := map[string]int64{}
	for id := range want {
		tx, err := s.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		e, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: id, Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`), Profile: echo.Name})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		ids[id] = e.ID
	}
	if n, err := w.Work(t.Context()); n != 2 || err != nil {
		t.Fatalf("Work = %d, %v; want both delivered", n, err)
	}
	for id, d := range want {
		got, err := s.Outbox.Get(t.Context(), ids[id])
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != d.Status || got.LastErrorCode != d.LastErrorCode {
			t.Errorf("%s: %s/%q, want %s/%q", id, got.Status, got.LastErrorCode, d.Status, d.LastErrorCode)
		}
	}
}

// TestAWorkerWithoutTheProfileRetries: a worker whose Store does not know
// a delivery's profile (a process not yet given it, in a rolling deploy:
// the one that enqueued did) sends nothing and retries the delivery,
// without counting the endpoint against its breaker, rather than fail
// it for good; a worker that knows the profile then delivers it.
func TestAWorkerWithoutTheProfileRetries(t *testing.T) {
	t.Parallel()
	echo := ack.Profile{Name: "echo.v1", Verify: func(ack.Sent, []byte) error { return nil }}
	path := filepath.Join(t.TempDir(), "outbox.db")
	withEcho := store.Config{Profiles: func(name string) (ack.Profile, bool) {
		if name == echo.Name {
			return echo, true
		}
		return ack.Builtin(name)
	}}
	updated, err := sqlite.Open(t.Context(), path, withEcho)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { updated.Close() })
	behind, err := sqlite.Open(t.Context(), path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { behind.Close() })
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(srv.Close)
	signer := newSigner(t)
	tx, err := updated.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e, err := updated.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`), Profile: echo.Name})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	work := func(s *store.Store) store.Delivery {
		t.Helper()
		w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Transport: loopbackGuard(t, srv.URL).Transport(),
			Backoff: func(int, time.Duration) time.Duration { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := w.Work(t.Context()); n != 1 || err != nil {
			t.Fatalf("Work = %d, %v; want the delivery claimed", n, err)
		}
		d, err := s.Outbox.Get(t.Context(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := work(behind); d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeConfigInvalid || requests.Load() != 0 {
		t.Fatalf("a worker without the profile: %s/%s after %d requests, want retry_wait/config_invalid and none sent", d.Status, d.LastErrorCode, requests.Load())
	}
	if eps, err := behind.Endpoints.List(t.Context()); err != nil || len(eps) != 0 && eps[0].ConsecutiveFailures != 0 {
		t.Fatalf("endpoints after the unsent attempt: %+v, %v; want no failure counted", eps, err)
	}
	if d := work(updated); d.Status != courier.StatusSucceeded || requests.Load() != 1 {
		t.Fatalf("a worker with the profile: %s after %d requests, want succeeded after 1", d.Status, requests.Load())
	}
}
