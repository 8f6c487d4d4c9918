package couriertest_test

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
)

// TestKeysVerifyWhatTheySign: each scheme's pair accepts a request its
// signer signed, and refuses it once the body changed.
func TestKeysVerifyWhatTheySign(t *testing.T) {
	t.Parallel()
	const origin = "https://receiver.example"
	for name, keys := range map[string]couriertest.Keys{
		"standard webhooks": couriertest.StandardWebhooksKeys("s"),
		"rfc 9421":          couriertest.RFC9421Keys("s", origin),
		"adcp hmac":         couriertest.AdCPHMACKeys("s"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body := []byte(`{"id":"n-1"}`)
			req := couriertest.NewRequest(origin+"/hooks", "n-1", body, keys.Signer)
			got, _ := io.ReadAll(req.Body)
			p, err := keys.Verifier.Verify(t.Context(), req, got)
			if err != nil || p.Sender != "s" {
				t.Fatalf("Verify = %+v, %v", p, err)
			}
			req = couriertest.NewRequest(origin+"/hooks", "n-1", body, keys.Signer)
			if _, err := keys.Verifier.Verify(t.Context(), req, []byte(`{"id":"n-2"}`)); !errors.Is(err, courier.CodeSignatureInvalid) {
				t.Fatalf("a changed body verified: %v", err)
			}
		})
	}
	// Bearer signs no body: it proves who sent, not what.
	keys := couriertest.BearerKeys("s")
	if p, err := keys.Verifier.Verify(t.Context(), couriertest.NewRequest(origin, "n-1", []byte("{}"), keys.Signer), []byte("{}")); err != nil || p.Sender != "s" {
		t.Fatalf("bearer: %+v, %v", p, err)
	}
}

// TestPostgresStoreIsFreshAndMigrated: each call is an empty database of
// its own with courier's tables.
func TestPostgresStoreIsFreshAndMigrated(t *testing.T) {
	t.Parallel()
	a, b := couriertest.PostgresStore(t, store.Config{}), couriertest.PostgresStore(t, store.Config{})
	tx, err := a.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for s, want := range map[*store.Store]int{a: 1, b: 0} {
		h, err := s.Outbox.Health(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if h.Counts[courier.StatusPending] != want {
			t.Fatalf("%d pending, want %d", h.Counts[courier.StatusPending], want)
		}
	}
}

// TestNewEffectsOnSharedDatabase: receivers of several Stores over one
// PostgreSQL database, as PostgresStores gives them, each make their
// Effects at once. CREATE TABLE IF NOT EXISTS racing itself on
// PostgreSQL fails one of them with a unique violation on the catalog.
func TestNewEffectsOnSharedDatabase(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		stores := couriertest.PostgresStores(t, 6, store.Config{})
		errs := make(chan error, len(stores))
		var wg sync.WaitGroup
		for _, s := range stores {
			wg.Go(func() {
				e, err := couriertest.NewEffects(t.Context(), s)
				if err == nil {
					_, err = e.Counts(t.Context())
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// fatalTB records a Fatalf and ends the goroutine that called it, as
// testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestPostgresStoresRefusesNoStores: a count below one fails the test
// with the reason (it panicked making a slice of negative length).
func TestPostgresStoresRefusesNoStores(t *testing.T) {
	for _, n := range []int{0, -1} {
		tb := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			couriertest.PostgresStores(tb, n, store.Config{})
		}()
		<-done
		if !strings.Contains(tb.msg, "want 1 or more") {
			t.Errorf("PostgresStores(%d) failed the test with %q, want the reason", n, tb.msg)
		}
	}
}
