package postgres_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// rfc9421Signed returns one RFC 9421-signed request, created at created, and
// the public key that verifies it.
func rfc9421Signed(t *testing.T, created time.Time, body []byte) (*http.Request, signature.JWK) {
	t.Helper()
	key, err := signature.GenerateJWK("kid-1", signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://buyer.example.com/hook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := signer.Sign(req, signature.Message{ID: "n-1", Body: body, Time: created}); err != nil {
		t.Fatal(err)
	}
	return req, key.Public()
}

func rfc9421Verifier(t *testing.T, key signature.JWK, replay signature.ReplayCache, now func() time.Time) signature.Verifier {
	t.Helper()
	v, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
		Sender: "seller", Keys: []signature.JWK{key}, Origin: "https://buyer.example.com",
		Replay: replay, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestReplayTwoReceiversOneNonce: two receiver processes (two Stores,
// two pools) on one PostgreSQL database, each verifying the same signed
// request many times at once: exactly one verification is accepted.
func TestReplayTwoReceiversOneNonce(t *testing.T) {
	t.Parallel()
	stores := couriertest.PostgresStores(t, 2, store.Config{})
	body := []byte(`{"id":"n-1"}`)
	now := time.Now()
	req, key := rfc9421Signed(t, now, body)
	clock := func() time.Time { return now }
	verifiers := []signature.Verifier{rfc9421Verifier(t, key, stores[0].Replay, clock), rfc9421Verifier(t, key, stores[1].Replay, clock)}
	var accepted, replayed atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 32 {
		wg.Go(func() {
			<-start
			r := req.Clone(context.Background())
			_, err := verifiers[i%2].Verify(context.Background(), r, body)
			switch {
			case err == nil:
				accepted.Add(1)
			case courier.CodeOf(err) == courier.CodeWebhookReplayed:
				replayed.Add(1)
			default:
				t.Errorf("Verify: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if accepted.Load() != 1 || replayed.Load() != 31 {
		t.Fatalf("accepted %d, replayed %d; want 1 and 31", accepted.Load(), replayed.Load())
	}
}

// TestReplayRefusedWhenTheDatabaseClockIsAhead: the store's replay cache
// judges expiry by the database's clock (Config.Now defaults to it on
// PostgreSQL), the verifier its window by the receiver's own. A receiver
// whose clock is 2 s behind the database server's (real database clock
// here, nothing injected into the store) accepted the same signed request
// twice in the last seconds of its window: the first acceptance was
// recorded already expired. The cache keeps pairs past their expiry.
func TestReplayRefusedWhenTheDatabaseClockIsAhead(t *testing.T) {
	t.Parallel()
	s := couriertest.PostgresStore(t, store.Config{}) // the database's clock
	body := []byte(`{"id":"n-1"}`)
	// The receiver's clock: 2 s behind the database's, frozen for the test.
	receiverNow := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	clock := func() time.Time { return receiverNow }
	// Signed 360 s ago: expires (created+300) + the default skew (60) is
	// exactly the receiver's now, the last second the verifier accepts.
	req, key := rfc9421Signed(t, receiverNow.Add(-360*time.Second), body)
	v := rfc9421Verifier(t, key, s.Replay, clock)

	if _, err := v.Verify(context.Background(), req.Clone(context.Background()), body); err != nil {
		t.Fatalf("first Verify: %v", err)
	}
	_, err := v.Verify(context.Background(), req.Clone(context.Background()), body)
	if courier.CodeOf(err) != courier.CodeWebhookReplayed {
		t.Fatalf("the same signed request verified again: err = %v; want webhook_signature_replayed", err)
	}
}

// TestReplayKeptPastPruneInsideTheWindow: the same through Prune: pruning
// the replay cache by the database's clock removed a pair the verifier's
// window still accepts.
func TestReplayKeptPastPruneInsideTheWindow(t *testing.T) {
	t.Parallel()
	s := couriertest.PostgresStore(t, store.Config{})
	body := []byte(`{"id":"n-1"}`)
	receiverNow := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	clock := func() time.Time { return receiverNow }
	req, key := rfc9421Signed(t, receiverNow.Add(-359*time.Second), body) // one second left
	v := rfc9421Verifier(t, key, s.Replay, clock)
	if _, err := v.Verify(context.Background(), req.Clone(context.Background()), body); err != nil {
		t.Fatalf("first Verify: %v", err)
	}
	n, err := s.Replay.Prune(context.Background(), store.PruneParams{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(context.Background(), req.Clone(context.Background()), body)
	if courier.CodeOf(err) != courier.CodeWebhookReplayed {
		t.Fatalf("after Prune (%d pairs), the same signed request verified again: err = %v", n, err)
	}
}
