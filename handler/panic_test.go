package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// panicTarget is a receiver whose function runs first (until it is
// cleared) and then applies, the Events it reported, and a signed request
// for it.
type panicTarget struct {
	h       http.Handler
	first   atomic.Pointer[func()]
	calls   atomic.Int32
	mu      sync.Mutex
	events  []handler.Event
	request func(t *testing.T, url string) *http.Request
}

func (p *panicTarget) hook(e handler.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
}

func (p *panicTarget) reported() []handler.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]handler.Event(nil), p.events...)
}

// run is the application's function: first, while it is set, then an
// effect-free success.
func (p *panicTarget) run() {
	p.calls.Add(1)
	if f := p.first.Load(); f != nil {
		(*f)()
	}
}

// panicTargets returns a courier Receiver (Standard Webhooks) and a
// Reporting receiver (AdCP HMAC), each on a SQLite inbox of its own, whose
// function runs first.
func panicTargets(t *testing.T, first func()) map[string]*panicTarget {
	t.Helper()
	open := func() *store.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	sign := func(signer signature.Signer, id string, body []byte) func(t *testing.T, url string) *http.Request {
		return func(t *testing.T, url string) *http.Request {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if err := signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
			return req
		}
	}
	receiver, reporting := &panicTarget{}, &panicTarget{}
	for _, p := range []*panicTarget{receiver, reporting} {
		p.first.Store(&first)
	}

	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	swVerifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "s", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	swSigner, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	if receiver.h, err = handler.NewReceiver(handler.ReceiverConfig{Store: open(), Verifier: swVerifier, Hook: receiver.hook},
		func(context.Context, *sqlx.Tx, stressNote) error { receiver.run(); return nil }); err != nil {
		t.Fatal(err)
	}
	receiver.request = sign(swSigner, "note-1", []byte(`{"id":"note-1","amount":1}`))

	secret, err := signature.ParseSecret("s1", "a-shared-secret-of-thirty-two-bytes-or-more")
	if err != nil {
		t.Fatal(err)
	}
	hmacVerifier, err := signature.NewAdCPHMACVerifier(signature.AdCPHMACVerifierConfig{Sender: reportingSender, Secrets: []signature.Secret{secret}})
	if err != nil {
		t.Fatal(err)
	}
	hmacSigner, err := signature.NewAdCPHMACSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	if reporting.h, err = handler.NewReporting(handler.ReportingConfig{Store: open(), Verifier: hmacVerifier, Hook: reporting.hook},
		func(context.Context, *sqlx.Tx, ack.Reporting) error { reporting.run(); return nil }); err != nil {
		t.Fatal(err)
	}
	reporting.request = sign(hmacSigner, "report-1", deliveryReport(t))
	return map[string]*panicTarget{"receiver": receiver, "reporting": reporting}
}

// TestPanicNilInTheFunctionIsA500: a function that panics with nil is
// answered 500 internal_error by the Recover in front of the receiver,
// reported to the Hook as such, and processed again on the next attempt,
// whether Go makes the panic a *runtime.PanicNilError (the default) or
// recover returns nil for it (GODEBUG=panicnil=1, run in a process of its
// own). Under panicnil=1 the receivers took a nil from recover for
// runtime.Goexit and swallowed the panic: the handler returned with
// nothing written, and net/http answered an empty 200, which an AdCP
// sender takes for a delivery received, though nothing was.
func TestPanicNilInTheFunctionIsA500(t *testing.T) {
	if os.Getenv("COURIER_TEST_PANICNIL") != "1" {
		t.Run("GODEBUG panicnil=1", func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPanicNilInTheFunctionIsA500$", "-test.v")
			cmd.Env = append(os.Environ(), "GODEBUG=panicnil=1", "COURIER_TEST_PANICNIL=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("under GODEBUG=panicnil=1: %v\n%s", err, out)
			}
		})
	}
	for name, p := range panicTargets(t, func() { panic(nil) }) { //nolint:govet // the case under test
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(middleware.Recover(nil)(p.h))
			t.Cleanup(srv.Close)
			resp, err := srv.Client().Do(p.request(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var problem struct{ Code courier.Code }
			_ = json.Unmarshal(body, &problem)
			if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Content-Type") != "application/problem+json" || problem.Code != courier.CodeInternal {
				t.Errorf("a function that panicked with nil: %d %s %q, want 500 problem+json internal_error", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if got := p.reported(); len(got) != 1 || got[0].HTTPStatus != http.StatusInternalServerError || got[0].Code != courier.CodeInternal {
				t.Errorf("reported %+v, want one Event: 500 internal_error", got)
			}
			// Nothing was recorded: the next attempt processes it.
			p.first.Store(nil)
			resp, err = srv.Client().Do(p.request(t, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || p.calls.Load() != 2 {
				t.Errorf("the next attempt: %d after %d runs of the function, want 200 after 2", resp.StatusCode, p.calls.Load())
			}
		})
	}
}

// TestGoexitInTheFunctionIsNoPanic: a function that ends its goroutine
// (runtime.Goexit, as t.FailNow does) has panicked nothing: the receiver
// reports no answer for it and writes none.
func TestGoexitInTheFunctionIsNoPanic(t *testing.T) {
	t.Parallel()
	for name, p := range panicTargets(t, runtime.Goexit) {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			done := make(chan struct{})
			go func() {
				defer close(done)
				p.h.ServeHTTP(rec, p.request(t, "http://receiver.example/hooks"))
			}()
			<-done
			if p.calls.Load() != 1 {
				t.Fatalf("the function ran %d times, want once", p.calls.Load())
			}
			if got := p.reported(); len(got) != 0 {
				t.Errorf("reported %+v for a goroutine that ended, want nothing", got)
			}
			if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
				t.Errorf("wrote %d %s %q for a goroutine that ended, want nothing", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
		})
	}
}
