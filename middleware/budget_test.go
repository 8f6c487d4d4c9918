package middleware_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
)

func TestBudget(t *testing.T) {
	t.Parallel()
	b := middleware.NewBudget(10)
	steps := []struct {
		reserve, release int64
		want             bool  // Reserve's answer
		inUse            int64 // after the step
	}{
		{reserve: 0, want: true, inUse: 0},
		{reserve: 4, want: true, inUse: 4},
		{reserve: 7, want: false, inUse: 4}, // refused whole: nothing taken
		{reserve: 6, want: true, inUse: 10}, // exactly full
		{reserve: 1, want: false, inUse: 10},
		{release: 4, inUse: 6},
		{reserve: 4, want: true, inUse: 10},
		{release: 10, inUse: 0},
	}
	for i, s := range steps {
		if s.release > 0 {
			b.Release(s.release)
		} else if got := b.Reserve(s.reserve); got != s.want {
			t.Errorf("step %d: Reserve(%d) = %v, want %v", i, s.reserve, got, s.want)
		}
		if got := b.InUse(); got != s.inUse {
			t.Errorf("step %d: InUse = %d, want %d", i, got, s.inUse)
		}
	}
	if b.Size() != 10 {
		t.Errorf("Size = %d, want 10", b.Size())
	}
}

func TestBudgetPanicsOnMisuse(t *testing.T) {
	t.Parallel()
	mustPanic(t, func() { middleware.NewBudget(0) })
	mustPanic(t, func() { middleware.NewBudget(-1) })
	mustPanic(t, func() { middleware.NewBudget(1).Reserve(-1) })
	mustPanic(t, func() { middleware.NewBudget(1).Release(1) })
	mustPanic(t, func() { middleware.NewBudget(1).Release(-1) })
}

func TestBudgetNeverExceedsItsSizeUnderConcurrency(t *testing.T) {
	t.Parallel()
	const size, workers, rounds = 100, 8, 2000
	b := middleware.NewBudget(size)
	var held, peak atomic.Int64 // what the workers hold, by their own count
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				n := int64(1 + (w*rounds+i)%30)
				if !b.Reserve(n) {
					continue
				}
				now := held.Add(n)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				held.Add(-n)
				b.Release(n)
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > size {
		t.Errorf("held %d bytes at once, over the size %d", p, size)
	}
	if p := peak.Load(); p == 0 {
		t.Error("no reservation ever succeeded")
	}
	if n := b.InUse(); n != 0 {
		t.Errorf("InUse = %d after every release, want 0", n)
	}
}

// Finding A: nothing bounded the bytes buffered across requests, so 800
// connections made the receiver hold 800 bodies. A Budget refuses what
// does not fit at once, 503 server_busy with Retry-After, and a request
// holds its reservation while next has its body.
func TestBudgetRefusesOverBudgetWith503(t *testing.T) {
	t.Parallel()
	const maxBytes = 64
	vb := setupVerify(t)
	budget := middleware.NewBudget(2 * maxBytes) // room for two bodies, shared by two handlers
	var calls atomic.Int32
	entered, release := make(chan int64), make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		entered <- budget.InUse()
		<-release
		w.Write([]byte("done"))
	})
	limits := middleware.BodyLimits{MaxBytes: maxBytes, Budget: budget}
	srv := httptest.NewServer(middleware.Verify(vb.verifier, limits)(next))
	t.Cleanup(srv.Close)
	other := httptest.NewServer(middleware.Verify(vb.verifier, limits)(next))
	t.Cleanup(other.Close)

	send := func(url string, body []byte) (int, http.Header, []byte, error) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, nil, nil, err
		}
		if err := vb.signer.Sign(req, signature.Message{ID: "n-1", Body: body, Time: vb.now}); err != nil {
			return 0, nil, nil, err
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, got, err
	}
	full := bytes.Repeat([]byte("a"), maxBytes)

	// Two bodies of maxBytes take the whole budget while next holds them.
	errs := make(chan error, 2)
	for _, url := range []string{srv.URL, other.URL} {
		go func() {
			code, _, got, err := send(url, full)
			if err == nil && (code != http.StatusOK || string(got) != "done") {
				err = fmt.Errorf("held request: %d %q", code, got)
			}
			errs <- err
		}()
	}
	for range 2 {
		if inUse := <-entered; inUse < maxBytes {
			t.Errorf("next runs with %d bytes reserved, want its body's %d held", inUse, maxBytes)
		}
	}
	if n := budget.InUse(); n != 2*maxBytes {
		t.Errorf("InUse = %d with two bodies in next, want %d", n, 2*maxBytes)
	}

	// Over budget: refused at once, on either handler, even a tiny body.
	for _, url := range []string{srv.URL, other.URL} {
		code, h, got, err := send(url, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp := &http.Response{StatusCode: code, Header: h}
		wantProblem(t, resp, got, http.StatusServiceUnavailable, courier.CodeServerBusy)
		if ra := h.Get("Retry-After"); ra != "1" {
			t.Errorf("Retry-After = %q, want 1", ra)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("next called %d times, want only the 2 admitted requests", n)
	}

	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// Given back: the next request fits again.
	go func() { <-entered }()
	if code, _, got, err := send(srv.URL, full); err != nil || code != http.StatusOK {
		t.Errorf("after the release: %d %q %v, want 200", code, got, err)
	}
	srv.Close()
	other.Close()
	if n := budget.InUse(); n != 0 {
		t.Errorf("InUse = %d after every request, want 0", n)
	}
}

func TestBodyLimitsValidate(t *testing.T) {
	t.Parallel()
	for _, l := range invalidLimits() {
		err := l.Validate()
		if !errors.Is(err, courier.CodeConfigInvalid) || courier.CodeOf(err) != courier.CodeConfigInvalid {
			t.Errorf("Validate(%+v) = %v, want a config_invalid error", l, err)
		}
	}
	valid := []middleware.BodyLimits{
		{},
		{MaxBytes: 1, Budget: middleware.NewBudget(1)},
		{MaxBytes: 1 << 30}, // its default Budget grows to fit
	}
	for _, l := range valid {
		if err := l.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", l, err)
		}
	}
}

// A Release of more than was reserved panicked only after taking the bytes
// off: a recovered panic left the Budget below zero, and from then on it
// admitted more than its size. The refused Release now changes nothing.
func TestBudgetRefusedReleaseLeavesItUnchanged(t *testing.T) {
	t.Parallel()
	b := middleware.NewBudget(10)
	if !b.Reserve(4) {
		t.Fatal("Reserve(4) of an empty Budget of 10 refused")
	}
	mustPanic(t, func() { b.Release(5) })
	if n := b.InUse(); n != 4 {
		t.Fatalf("InUse = %d after a refused Release, want the 4 still reserved", n)
	}
	if b.Reserve(7) {
		t.Error("Reserve(7) with 4 of 10 in use succeeded: the Budget holds more than its size")
	}
}

// panickingBody panics on its first read, as a broken body reader a
// middleware in front put in place might.
type panickingBody struct{}

func (panickingBody) Read([]byte) (int, error) { panic("body reader broke") }
func (panickingBody) Close() error             { return nil }

// TestBudgetIsGivenBackWhenTheBodyReadPanics: a panic while the body was
// read, after its bytes were reserved, kept the reservation for good, so
// under Recover every such request shrank the Budget until the server
// answered every body 503 server_busy. The reservation is given back on
// that path too.
func TestBudgetIsGivenBackWhenTheBodyReadPanics(t *testing.T) {
	t.Parallel()
	const maxBytes = 64
	breakBody := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = panickingBody{}
			next.ServeHTTP(w, r)
		})
	}
	accept := verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
		return signature.Principal{}, nil
	})
	chains := map[string]func(middleware.BodyLimits) http.Handler{
		"ReadBody": func(l middleware.BodyLimits) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { middleware.ReadBody(w, r, l) })
		},
		"Verify": func(l middleware.BodyLimits) http.Handler {
			return middleware.Verify(accept, l)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		},
	}
	for name, chain := range chains {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			budget := middleware.NewBudget(maxBytes)
			h := chain(middleware.BodyLimits{MaxBytes: maxBytes, Budget: budget})
			srv := httptest.NewServer(middleware.Recover(nil)(breakBody(h)))
			t.Cleanup(srv.Close)
			resp := post(t, srv.Client(), srv.URL, []byte("{}"), true, nil) // unknown length: reserves MaxBytes
			readAll(t, resp)
			if resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("status = %d, want Recover's 500", resp.StatusCode)
			}
			if n := budget.InUse(); n != 0 {
				t.Fatalf("InUse = %d after the request, want 0", n)
			}
		})
	}
}
