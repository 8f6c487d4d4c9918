package client_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
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
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
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
