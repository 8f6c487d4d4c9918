package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/courier-go/courier/internal/benchkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is the bare receiver, counting the POSTs of each notification
// id.
type recorder struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen[req.Header.Get("webhook-id")]++
	r.mu.Unlock()
	benchkit.BareAck(w, req)
}

// tinyOptions is the tests' shape: small, quick, and River's fetches not
// held back, so a test does not wait on River's cooldown.
func tinyOptions(n int) options {
	return options{n: n, rounds: 1, concurrency: 16, pgPool: 18, fetchCooldown: 10 * time.Millisecond}
}

// testEngine prepares the engine named as the program does, skipping t
// when PostgreSQL cannot be had (or failing it under COURIER_PG_REQUIRE).
func testEngine(t *testing.T, name string, pool int) *engine {
	t.Helper()
	engines, notes, stop, err := openEngines(t.Context(), []string{name}, pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if len(engines) == 0 {
		t.Skip(strings.Join(notes, "; "))
	}
	return engines[0]
}

// setup returns a bench posting to a new server running h, on the engine
// named.
func setup(t *testing.T, engineName string, o options, h http.Handler) (*bench, *engine) {
	t.Helper()
	e := testEngine(t, engineName, o.pgPool)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b, err := newBench(o, srv.URL, t.Output())
	if err != nil {
		t.Fatal(err)
	}
	return b, e
}

func TestEveryNotificationIsCompletedExactlyOnceOnEverySide(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const n = 200
			rec := &recorder{seen: make(map[string]int)}
			b, e := setup(t, name, tinyOptions(n), rec)

			// round checks each side's database itself: n rows, each
			// completed after one attempt.
			rd, err := b.round(t.Context(), e, 0)
			if err != nil {
				t.Fatalf("round: %v", err)
			}

			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, prefix := range []string{"c0-", "r0-", "b0-"} {
				for _, nt := range notifications(prefix, n) {
					if got := rec.seen[nt.ID]; got != 1 {
						t.Errorf("the receiver got %s %d times, want once", nt.ID, got)
					}
				}
			}
			if len(rec.seen) != 3*n {
				t.Errorf("the receiver got %d distinct notifications, want %d (%d per side)", len(rec.seen), 3*n, n)
			}
			for what, v := range map[string]float64{
				"courier enqueue": float64(rd.courierEnqueue), "River enqueue": float64(rd.riverEnqueue),
				"courier rate": rd.courierRate, "River rate": rd.riverRate, "bare rate": rd.bareRate,
			} {
				if v <= 0 {
					t.Errorf("%s = %v, want a positive figure", what, v)
				}
			}
		})
	}
}

// sides opens each side on e for the receiver at b.target.
func sides(t *testing.T, b *bench, e *engine) map[string]side {
	t.Helper()
	c, err := e.openCourier(t.Context(), "courier", courierConfig{
		target: b.target, guard: b.guard, signer: b.signer, concurrency: b.o.concurrency,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.close(); err != nil {
			t.Error(err)
		}
	})
	r, err := e.openRiver(t.Context(), "river", riverConfig{
		target: b.target, concurrency: b.o.concurrency, fetchCooldown: b.o.fetchCooldown,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.close(); err != nil {
			t.Error(err)
		}
	})
	return map[string]side{"courier": c, "River": r}
}

func TestARefusingReceiverFailsTheRunInsteadOfHangingIt(t *testing.T) {
	t.Parallel()
	refuse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	})
	b, e := setup(t, "sqlite", tinyOptions(5), refuse)
	for name, s := range sides(t, b, e) {
		t.Run(name, func(t *testing.T) {
			ns := notifications("x-", 5)
			if _, err := s.enqueue(t.Context(), ns); err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			_, err := s.deliver(t.Context(), len(ns))
			if err == nil {
				t.Fatal("deliver to a receiver answering 503 succeeded")
			}
			t.Logf("deliver: %v", err)
		})
	}
	t.Run("bare loop", func(t *testing.T) {
		_, err := bareLoop(t.Context(), b.target, notifications("x-", 5), 2)
		if err == nil || !strings.Contains(err.Error(), "status 503") {
			t.Fatalf("bare loop to a receiver answering 503: err = %v, want the status", err)
		}
	})
}

func TestVerifyFailsUntilEveryNotificationIsCompleted(t *testing.T) {
	t.Parallel()
	b, e := setup(t, "sqlite", tinyOptions(3), http.HandlerFunc(benchkit.BareAck))
	for name, s := range sides(t, b, e) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			ns := notifications("v-", 3)
			if _, err := s.enqueue(ctx, ns); err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			if err := s.verify(ctx, len(ns)); err == nil {
				t.Fatal("verify passed with every notification still due")
			}
			if _, err := s.deliver(ctx, len(ns)); err != nil {
				t.Fatalf("deliver: %v", err)
			}
			if err := s.verify(ctx, len(ns)+1); err == nil {
				t.Fatal("verify passed with one notification fewer than asked")
			}
			if err := s.verify(ctx, len(ns)); err != nil {
				t.Fatalf("verify after delivery: %v", err)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.n != 10_000 || o.rounds != 3 || o.concurrency != 64 || o.endpointConc != 0 || o.pgPool != 66 || strings.Join(o.engines, ",") != "sqlite,postgres" {
		t.Errorf("defaults = %+v, want n 10000, 3 rounds, concurrency 64, courier's own fair share, pool 66, both engines", o)
	}
	for _, args := range [][]string{
		{"-n", "0"}, {"-rounds", "0"}, {"-concurrency", "0"}, {"-concurrency", "10001"},
		{"-endpoint-concurrency", "-1"}, {"-concurrency", "8", "-endpoint-concurrency", "9"},
		{"-pgpool", "-1"}, {"-river-fetch-cooldown", "0s"}, {"extra"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}

func TestAlternateReversesTheOrderInOddRounds(t *testing.T) {
	t.Parallel()
	for round, want := range []string{"abc", "cba", "abc"} {
		var got strings.Builder
		step := func(s string) func() error {
			return func() error { got.WriteString(s); return nil }
		}
		if err := alternate(round, step("a"), step("b"), step("c")); err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Errorf("round %d ran %s, want %s", round, got.String(), want)
		}
	}
	failed := errors.New("failed")
	ran := 0
	err := alternate(0, func() error { ran++; return failed }, func() error { ran++; return nil })
	if !errors.Is(err, failed) || ran != 1 {
		t.Errorf("alternate after a failure: err %v, %d ran; want the failure and no further step", err, ran)
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}
