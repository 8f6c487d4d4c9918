package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestASettleLateOnAStarvedPoolCountsTheAttemptOnce: the receiver
// acknowledges the request, but the application's transaction holds the
// one connection SQLite's writes go through, and the settle waits for it
// until the lease has expired. The store fences the late settle off (a
// settle needs an unexpired lease), and the worker hears the lease lost.
// A request was sent, and may have been acted on: its attempt, counted as
// the delivery was claimed, stands, and is counted once. The claim that
// takes the expired lease back logs it lease_expired; with budget left
// the delivery is due again at once and sent again, for the receiver to
// dedupe, and succeeds on its second attempt; with none left it fails
// lease_expired, sent once, as a delivery whose worker died holding its
// last attempt does. What the late settle costs is its outcome, not a
// second count of its attempt.
func TestASettleLateOnAStarvedPoolCountsTheAttemptOnce(t *testing.T) {
	t.Parallel()
	const lease = time.Minute
	tests := []struct {
		name        string
		maxAttempts int
		claimed     int // by the Work after the lease expired
		want        courier.Status
		attempts    int
		requests    int32
		logged      []courier.Code // the attempts log's codes, oldest first
	}{
		{"with budget left", 0, 1, courier.StatusSucceeded, 2, 2, []courier.Code{courier.CodeLeaseExpired, ""}},
		{"on its last attempt", 1, 0, courier.StatusFailed, 1, 1, []courier.Code{courier.CodeLeaseExpired}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := fakeclock.New()
			settling := make(chan struct{})
			tracer := &atSettle{do: func() { close(settling) }}
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{Now: clock.Now, Tracer: tracer})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			var requests atomic.Int32
			held := make(chan *sqlx.Tx, 1) // the application's transaction, begun as the first request came
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if requests.Add(1) == 1 {
					tx, err := s.Begin(context.WithoutCancel(r.Context())) // held past the request
					if err != nil {
						t.Errorf("the application's Begin: %v", err)
					}
					held <- tx
				}
				w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
			}))
			t.Cleanup(srv.Close)
			e, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{NotificationID: "n-1", Endpoint: srv.URL + "/hooks",
				Payload: []byte(`{}`), MaxAttempts: tt.maxAttempts})
			if err != nil {
				t.Fatal(err)
			}
			events := make(chan client.Event, 10)
			w, err := client.NewWorker(client.Config{Store: s, Signer: newSigner(t), Transport: loopbackGuard(t, srv.URL).Transport(),
				Lease: lease, Logger: slog.New(slog.DiscardHandler), Hook: func(e client.Event) { events <- e }})
			if err != nil {
				t.Fatal(err)
			}

			worked := make(chan error, 1)
			go func() {
				_, err := w.Work(t.Context())
				worked <- err
			}()
			tx := <-held
			<-settling // the settle waits for the connection tx holds
			clock.Advance(2 * lease)
			if tx != nil {
				tx.Rollback()
			}
			if err := <-worked; err != nil {
				t.Fatalf("Work = %v", err)
			}
			if ev := <-events; !ev.LeaseLost || ev.Status != "" {
				t.Fatalf("event %+v, want the settle's lease lost", ev)
			}
			d, err := s.Outbox.Get(t.Context(), e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != courier.StatusLeased || d.Attempts != 1 || requests.Load() != 1 {
				t.Fatalf("after the late settle: %s after %d attempts, %d requests; want leased after 1, 1 request", d.Status, d.Attempts, requests.Load())
			}

			if n, err := w.Work(t.Context()); n != tt.claimed || err != nil {
				t.Fatalf("Work once the lease expired = %d, %v; want %d claimed", n, err, tt.claimed)
			}
			d, err = s.Outbox.Get(t.Context(), e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != tt.want || d.Attempts != tt.attempts || requests.Load() != tt.requests {
				t.Fatalf("%s after %d attempts, %d requests; want %s after %d, %d requests", d.Status, d.Attempts, requests.Load(), tt.want, tt.attempts, tt.requests)
			}
			logged, err := s.Outbox.Attempts(t.Context(), e.ID)
			if err != nil {
				t.Fatal(err)
			}
			var codes []courier.Code
			for i, a := range logged {
				codes = append(codes, a.ErrorCode)
				if a.Attempt != i+1 {
					t.Errorf("attempts log row %d is attempt %d, want %d", i, a.Attempt, i+1)
				}
			}
			if len(codes) != len(tt.logged) || (len(codes) > 0 && codes[0] != tt.logged[0]) || (len(codes) > 1 && codes[1] != tt.logged[1]) {
				t.Errorf("attempts log codes %q, want %q", codes, tt.logged)
			}
		})
	}
}
