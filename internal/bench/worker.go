package main

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// runLimit bounds any one measured run, so a stuck run ends the program
// with an error instead of hanging.
const runLimit = 5 * time.Minute

// workerRun runs a Worker with cfg until m attempts have succeeded and
// returns how long that took from Run's start. Every attempt must succeed.
func workerRun(ctx context.Context, cfg client.Config, m int) (time.Duration, error) {
	return runUntil(ctx, cfg, m, func(client.Event) bool { return true })
}

// workerConfig is the worker as the figures run it: the real signing,
// SSRF-guarded transport opened for the loopback receiver, defaults for
// everything else but the concurrency.
func workerConfig(s *store.Store, signer signature.Signer, srv *httptest.Server, concurrency int) client.Config {
	return client.Config{
		Store:       s,
		Signer:      signer,
		Transport:   couriertest.Guard(srv.URL).Transport(),
		Concurrency: concurrency,
		Owner:       "bench",
	}
}

// benchWorker is figure 2: the worker draining an outbox pre-filled with
// m due deliveries to the bare receiver, against a bare POST loop of the
// same bodies at the same concurrency to the same receiver.
func benchWorker(ctx context.Context, e *engine, z sizes, o options, bare *httptest.Server, signer signature.Signer) (row, error) {
	d, err := e.open(ctx, "worker")
	if err != nil {
		return row{}, err
	}
	var courier, baseline runs
	for r := range z.workerRounds {
		if _, err := d.fill(ctx, fmt.Sprintf("w%d-", r), z.workerM, bare.URL, benchPayload); err != nil {
			return row{}, err
		}
		reqs := bareRequests(ids(fmt.Sprintf("b%d-", r), z.workerM), func(int) []byte { return benchPayload })
		bareRun := func() error {
			return baseline.measure(z.workerM, func() (time.Duration, error) { return postLoop(ctx, bare.URL, reqs, o.concurrency) })
		}
		workRun := func() error {
			return courier.measure(z.workerM, func() (time.Duration, error) {
				return workerRun(ctx, workerConfig(d.s, signer, bare, o.concurrency), z.workerM)
			})
		}
		if err := alternate(r, bareRun, workRun); err != nil {
			return row{}, fmt.Errorf("%s worker round %d: %w", e.name, r+1, err)
		}
		progress("  round %d: worker %.0f/s, bare loop %.0f/s", r+1, courier.last(), baseline.last())
	}
	target := 0.50
	if e.name == "postgres" {
		target = 0.15
	}
	rw := throughputRow("2", fmt.Sprintf("worker -> bare receiver vs bare POST loop (c=%d, %d due)", o.concurrency, z.workerM),
		e.name, courier, baseline, target)
	rw.detail = cpuDetail(courier, baseline)
	return rw, nil
}

// alternate runs a and b, a first in even rounds and b first in odd ones,
// so a drift of the machine during the run falls on both.
func alternate(round int, a, b func() error) error {
	if round%2 == 1 {
		a, b = b, a
	}
	return errors.Join(a(), b())
}
