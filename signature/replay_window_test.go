package signature_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestRFC9421ReplayAcrossTheWindowsEnd: one signed request delivered twice
// at once in the last second of its window, over HTTP, to a receiver whose
// LookupKey takes a while (a JWK Set fetched again, say): both deliveries
// pass the window check, and the window ends before either reaches the
// replay check. The cache judged the pair by its clock then and took the
// first delivery's pair for expired, so both deliveries were accepted: by
// the default in-memory cache after a second, by the store's on either
// engine (which keeps pairs 5 minutes past their expiry) after that
// margin. At most one may be.
func TestRFC9421ReplayAcrossTheWindowsEnd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cache func(t *testing.T, clock func() time.Time) signature.ReplayCache
		stall time.Duration // how long LookupKey takes
	}{
		{"memory", func(*testing.T, func() time.Time) signature.ReplayCache { return nil }, time.Second},
		{"sqlite", func(t *testing.T, clock func() time.Time) signature.ReplayCache {
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "courier.db"), store.Config{Now: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s.Replay
		}, 6 * time.Minute},
		{"postgres", func(t *testing.T, clock func() time.Time) signature.ReplayCache {
			return couriertest.PostgresStore(t, store.Config{Now: clock}).Replay
		}, 6 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := signature.GenerateJWK("k1", signature.AlgEd25519)
			if err != nil {
				t.Fatal(err)
			}
			created := time.Unix(1_776_520_800, 0)
			var mu sync.Mutex
			now := created.Add(360*time.Second + 500*time.Millisecond) // expires + skew, and half a second
			clock := func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				return now
			}
			arrived, release := make(chan struct{}), make(chan struct{})
			verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
				Sender: "seller", Origin: "http://127.0.0.1", Now: clock, Replay: tt.cache(t, clock),
				LookupKey: func(ctx context.Context, kid string) (signature.JWK, bool, error) {
					arrived <- struct{}{}
					<-release
					return key.Public(), kid == key.KeyID(), nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(middleware.Verify(verifier, middleware.BodyLimits{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNoContent)
			})))
			defer srv.Close()

			body := []byte(`{"id":"n-1"}`)
			signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
			if err != nil {
				t.Fatal(err)
			}
			// Signed for the origin the verifier serves, sent to the test
			// server under that name.
			signed, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/hook", bytes.NewReader(body))
			signed.Header.Set("Content-Type", "application/json")
			if err := signer.Sign(signed, signature.Message{ID: "n-1", Body: body, Time: created}); err != nil {
				t.Fatal(err)
			}
			statuses := make(chan int, 2)
			for range 2 {
				go func() {
					req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hook", bytes.NewReader(body))
					req.Header = signed.Header.Clone()
					req.Host = "127.0.0.1"
					resp, err := srv.Client().Do(req)
					if err != nil {
						t.Error(err)
						statuses <- 0
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					statuses <- resp.StatusCode
				}()
			}
			<-arrived
			<-arrived // both passed the window check
			mu.Lock()
			now = now.Add(tt.stall)
			mu.Unlock()
			close(release)
			accepted := 0
			for range 2 {
				if <-statuses == http.StatusNoContent {
					accepted++
				}
			}
			if accepted > 1 {
				t.Fatalf("the same signed request was accepted %d times", accepted)
			}
		})
	}
}
