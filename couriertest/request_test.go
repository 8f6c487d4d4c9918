package couriertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestNewRequestReachesASource: a request NewRequest signed is what a
// worker sends, so a Source under test applies the command it carries. It
// lacked the attempt header every worker request has and a Source
// requires, and the Source refused it.
func TestNewRequestReachesASource(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "source.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	keys := couriertest.StandardWebhooksKeys("cms-host")
	contract := ack.Digest([]byte("contract"))
	applied := 0
	src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: keys.Verifier, CapabilitiesSHA256: contract},
		func(context.Context, *sqlx.Tx, ack.Command) error { applied++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	cmd, payload := saleCommand(t, contract)
	rec := httptest.NewRecorder()
	src.ServeHTTP(rec, couriertest.NewRequest("https://source.example/commands", cmd.DedupeKey(), payload, keys.Signer))
	if rec.Code != http.StatusOK || applied != 1 {
		t.Fatalf("the Source answered %d %s and applied the command %d times; want 200 and once", rec.Code, rec.Body, applied)
	}
}

// TestWrongAckAltersACommandResponse: WrongAck in front of a Source
// alters the response the worker verifies, as it does a Receiver's Ack,
// and the worker fails the command with ack_invalid. The response binds
// the command by its payload_sha256; WrongAck looked for an Ack's
// notification_sha256 only and let it through untouched.
func TestWrongAckAltersACommandResponse(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	open := func(name string) *store.Store {
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), name), store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	host, inbox := open("host.db"), open("source.db")
	keys := couriertest.StandardWebhooksKeys("cms-host")
	contract := ack.Digest([]byte("contract"))
	src, err := handler.NewSource(handler.SourceConfig{Store: inbox, Verifier: keys.Verifier, CapabilitiesSHA256: contract},
		func(context.Context, *sqlx.Tx, ack.Command) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(src, couriertest.Sequence(couriertest.Fault{WrongAck: true}))
	t.Cleanup(srv.Close)
	_, payload := saleCommand(t, contract)
	tx, err := host.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.Outbox.EnqueueCommand(ctx, tx, store.CommandParams{Endpoint: srv.URL + "/commands", Payload: payload}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(client.Config{Store: host, Signer: keys.Signer, Transport: srv.Guard().Transport(),
		Backoff: func(int, time.Duration) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	h, err := host.Outbox.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.WrongAcks != 1 || h.Counts[courier.StatusFailed] != 1 {
		t.Fatalf("WrongAck: %d altered answers, %d commands failed; want 1 and 1 (outbox %v)", st.WrongAcks, h.Counts[courier.StatusFailed], h.Counts)
	}
}

// TestServerGuardBeforeStart: asking an unstarted Server for its Guard is
// a mistake of order, and the panic says so, rather than that an empty
// host is not an IP address.
func TestServerGuardBeforeStart(t *testing.T) {
	t.Parallel()
	srv := couriertest.NewUnstartedServer(http.NotFoundHandler(), nil)
	t.Cleanup(srv.Close)
	defer func() {
		if msg := fmt.Sprint(recover()); !strings.Contains(msg, "Start") {
			t.Fatalf("Guard before Start panicked with %q; want it to name Start", msg)
		}
	}()
	srv.Guard()
}

// saleCommand returns a change command built for contract, and its payload.
func saleCommand(t *testing.T, contract string) (ack.Command, []byte) {
	t.Helper()
	cmd, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: "req-1", SourceMaxAttempts: 5,
		CapabilitiesSHA256: contract, Body: json.RawMessage(`{"title":"sale"}`)})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := cmd.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return cmd, payload
}

// TestNewRequestToAnHTTPSURLReadsAsTLS: served to a handler directly, a
// request NewRequest made for an https URL reads as one that came over
// TLS, as httptest.NewRequest's does (a receiver's span recorded
// url.scheme http for it); one for an http URL does not. Sent by an
// http.Client to a TLS server, it goes through.
func TestNewRequestToAnHTTPSURLReadsAsTLS(t *testing.T) {
	t.Parallel()
	keys := couriertest.StandardWebhooksKeys("sender")
	sawTLS := make(chan bool, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sawTLS <- r.TLS != nil })
	for _, c := range []struct {
		url string
		tls bool
	}{{"https://receiver.example/hook", true}, {"http://receiver.example/hook", false}} {
		h.ServeHTTP(httptest.NewRecorder(), couriertest.NewRequest(c.url, "n-1", []byte(`{}`), keys.Signer))
		if got := <-sawTLS; got != c.tls {
			t.Errorf("%s served directly: TLS %v, want %v", c.url, got, c.tls)
		}
	}
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	resp, err := srv.Client().Do(couriertest.NewRequest(srv.URL+"/hook", "n-1", []byte(`{}`), keys.Signer))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-sawTLS; !got || resp.StatusCode != http.StatusOK {
		t.Errorf("sent over TLS: %d, TLS %v; want 200 over TLS", resp.StatusCode, got)
	}
}
