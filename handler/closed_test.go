package handler_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestAStoreClosedWhileTheFunctionRunsAnswersWhatWasKept: a Store closed
// while a receiver's function runs (a shutdown that did not wait for the
// receivers) never panics the request, and its answer says what was kept:
// 503 internal_error with Retry-After and nothing kept (over the database
// opened again, the sender's retry runs the function and is accepted), or
// the receiver's 200 with the record and the function's writes committed
// (the retry is a duplicate, answered without running the function),
// whether the function wrote through its transaction or not. A function
// that enqueues through the closed Store hears database_unavailable, and
// its request is answered 503.
func TestAStoreClosedWhileTheFunctionRunsAnswersWhatWasKept(t *testing.T) {
	t.Parallel()
	for _, does := range []string{"nothing", "writes", "enqueues"} {
		writes := does != "nothing"
		eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
			path := filepath.Join(t.TempDir(), "closed.db")
			s := openAt(t, path)
			if _, err := s.DB().ExecContext(t.Context(), "CREATE TABLE effects (n INTEGER)"); err != nil {
				t.Fatal(err)
			}
			e := target.open(t, anyOptions{store: s, appTx: func(ctx context.Context, tx *sqlx.Tx) error {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				switch does {
				case "writes":
					_, err := tx.ExecContext(ctx, "INSERT INTO effects (n) VALUES (1)")
					return err
				case "enqueues":
					if _, err := tx.ExecContext(ctx, "INSERT INTO effects (n) VALUES (1)"); err != nil {
						return err
					}
					_, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "relayed", Endpoint: "https://next.example/hooks", Payload: []byte(`{}`)})
					if !errors.Is(err, courier.CodeDatabaseUnavailable) {
						t.Errorf("Enqueue on the closed Store = %v, want database_unavailable", err)
					}
					return err
				}
				return nil
			}})
			rec := serve(e.handler, e.request(t))
			status, kept := rec.Code, rec.Code == e.ok
			switch {
			case kept && does == "enqueues":
				t.Fatalf("answered %d for a function that failed: %s", rec.Code, rec.Body)
			case kept:
			case rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "":
				t.Fatalf("does %s: answered %d (Retry-After %q): %s; want 503 with Retry-After, or %d", does, rec.Code, rec.Header().Get("Retry-After"), rec.Body, e.ok)
			case problemOf(t, rec).Code != courier.CodeInternal:
				t.Fatalf("does %s: answered 503 %s, want internal_error", does, rec.Body)
			}

			again := openAt(t, path)
			var effects int
			if err := again.DB().GetContext(t.Context(), &effects, "SELECT COUNT(*) FROM effects"); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1}[kept && writes]; effects != want {
				t.Fatalf("does %s: answered %d and kept %d effects, want %d", does, rec.Code, effects, want)
			}
			retry := target.open(t, anyOptions{store: again})
			wantStatus, wantCalls := retry.ok, map[bool]int32{false: 1}[kept]
			if target.name == "Reporting" && !kept {
				// Its claim, committed before the function, could not be
				// given back: it is left as by a receiver that died while
				// processing, to be taken over after StaleAfter.
				wantStatus, wantCalls = http.StatusServiceUnavailable, 0
			}
			if rec := serve(retry.handler, retry.request(t)); rec.Code != wantStatus || retry.calls.Load() != wantCalls {
				t.Fatalf("does %s: first answered %d; the retry over the reopened database answered %d after %d calls: %s; want %d after %d",
					does, status, rec.Code, retry.calls.Load(), rec.Body, wantStatus, wantCalls)
			}
		})
	}
}

// TestAReceiverWhoseReplayCacheIsItsClosedStoreIs503: an RFC 9421
// verifier keeps its nonces in the Store (store.Replay): once the Store
// is closed, a request whose signature verifies cannot have its nonce
// recorded, and is answered 503 internal_error with Retry-After, not a
// signature failure (401) the sender would not retry.
func TestAReceiverWhoseReplayCacheIsItsClosedStoreIs503(t *testing.T) {
	t.Parallel()
	s := openAt(t, filepath.Join(t.TempDir(), "closed.db"))
	key, err := signature.GenerateJWK("k1", signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	const origin = "https://receiver.example"
	verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{Sender: "agent", Keys: []signature.JWK{key.Public()}, Replay: s.Replay, Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(context.Context, *sqlx.Tx, ack.Terminal) error {
		calls.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n, body := terminal(t, "evt-closed")
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, origin+"/hooks", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := signer.Sign(req, signature.Message{ID: n.NotificationID, Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rec := serve(rcv, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || problemOf(t, rec).Code != courier.CodeInternal {
		t.Fatalf("answered %d (Retry-After %q): %s; want 503 internal_error with Retry-After", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if calls.Load() != 0 {
		t.Fatalf("the function ran %d times", calls.Load())
	}
}

// openAt opens a SQLite Store on the file at path, closed when t ends.
func openAt(t *testing.T, path string) *store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
