package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/signature"
)

const (
	// claimLimit is the batch one measured claim takes: the worker's
	// default batch (its default concurrency).
	claimLimit = workerConcurrency
	// claimsPerRound is how many claims a round makes before its leases
	// are released: 96 rows, under a tenth of the small outbox.
	claimsPerRound = 6
	// vacuumEvery is how many rounds pass between two VACUUMs on
	// PostgreSQL, which clear the dead row versions the claims and
	// releases leave at the head of the due index (autovacuum would clear
	// them from the small table far sooner than from the large one).
	vacuumEvery = 10
)

// benchClaim is figure 5: the cost of one Outbox.Claim of claimLimit rows
// from outboxes of z.claimSizes due rows (1k up to the large outbox). Each
// round makes claimsPerRound claims on every outbox, rotating which goes
// first, then releases the leases (not timed); a size's figure is its
// median claim. Row 5 holds the largest size against the smallest, as
// the target is stated for it; row 5b every size against every other,
// since a plan that is linear in the backlog can hide between the two
// ends.
func benchClaim(ctx context.Context, e *engine, z sizes, bare *httptest.Server) ([]row, error) {
	sizes := z.claimSizes
	outboxes := make([]*database, len(sizes))
	for i, n := range sizes {
		if i == len(sizes)-1 {
			large, took, err := e.largeOutbox(ctx, n, bare.URL)
			if err != nil {
				return nil, err
			}
			if took > 0 {
				progress("  filled %d due rows in %s", n, took.Round(time.Millisecond))
			}
			if err := large.releaseLeases(ctx); err != nil {
				return nil, err
			}
			outboxes[i] = large
			continue
		}
		d, err := e.open(ctx, "claim-"+count(n))
		if err != nil {
			return nil, err
		}
		if _, err := d.fill(ctx, "c-", n, bare.URL, benchPayload); err != nil {
			return nil, err
		}
		outboxes[i] = d
	}
	claims := func(d *database, out *[]time.Duration) error {
		for range claimsPerRound {
			start := time.Now()
			c, err := protocol.For(d.s).Claim(ctx, protocol.ClaimParams{Owner: "bench-claim", Limit: claimLimit, Lease: time.Minute})
			took := time.Since(start)
			if err != nil {
				return err
			}
			if len(c) != claimLimit {
				return fmt.Errorf("claim from %s returned %d rows, want %d", d.label, len(c), claimLimit)
			}
			*out = append(*out, took)
		}
		return d.releaseLeases(ctx)
	}
	measured := make([][]time.Duration, len(sizes))
	for r := -1; r < z.claimRounds; r++ { // round -1 warms every outbox and is not counted
		for k := range outboxes {
			i := (k + max(r, 0)) % len(outboxes)
			var sink []time.Duration
			out := &sink
			if r >= 0 {
				out = &measured[i]
			}
			if err := claims(outboxes[i], out); err != nil {
				return nil, fmt.Errorf("%s claim round %d: %w", e.name, r+1, err)
			}
		}
		if e.name == "postgres" && (r+1)%vacuumEvery == 0 {
			for _, d := range outboxes {
				if err := d.analyze(ctx); err != nil {
					return nil, err
				}
			}
		}
	}
	medians := make([]time.Duration, len(sizes))
	var parts []string
	for i, n := range sizes {
		medians[i] = median(measured[i])
		parts = append(parts, fmt.Sprintf("%s due %s/%s", count(n), fmtDuration(medians[i]), fmtDuration(percentile(measured[i], 90))))
	}
	last := len(sizes) - 1
	ends := costRow("5", fmt.Sprintf("claim %d rows: %s due vs %s due (%d claims each)", claimLimit, count(sizes[last]), count(sizes[0]), len(measured[0])),
		e.name, medians[last], medians[0], 2)
	ends.detail = "claim p50/p90 by backlog: " + strings.Join(parts, ", ")
	lo, hi := slices.Index(medians, slices.Min(medians)), slices.Index(medians, slices.Max(medians))
	flat := costRow("5b", fmt.Sprintf("claim %d rows: slowest vs fastest of %s due", claimLimit, sizeList(sizes)),
		e.name, medians[hi], medians[lo], 2)
	flat.courier += " @" + count(sizes[hi])
	flat.baseline += " @" + count(sizes[lo])
	return []row{ends, flat}, nil
}

func sizeList(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = count(n)
	}
	return strings.Join(parts, "/")
}

// memoryGrowth is the most the worker's heap may grow from the small
// backlog to the large one and still count as not growing.
const memoryGrowth = 1.25

// benchMemory is figure 6: the Go heap in use (runtime.ReadMemStats after
// a GC) while the worker delivers from an outbox of z.memSmall due rows to
// the bare receiver, against the same with the large outbox's due rows.
func benchMemory(ctx context.Context, e *engine, z sizes, o options, bare *httptest.Server, signer signature.Signer) (row, error) {
	small, err := e.open(ctx, "memory-small")
	if err != nil {
		return row{}, err
	}
	if _, err := small.fill(ctx, "m-", z.memSmall, bare.URL, benchPayload); err != nil {
		return row{}, err
	}
	large, took, err := e.largeOutbox(ctx, z.claimSizes[len(z.claimSizes)-1], bare.URL)
	if err != nil {
		return row{}, err
	}
	if took > 0 {
		progress("  filled %d due rows in %s", z.claimSizes[len(z.claimSizes)-1], took.Round(time.Millisecond))
	}
	if err := large.releaseLeases(ctx); err != nil {
		return row{}, err
	}
	idle := heapInUse()
	smallHeap, err := workerHeap(ctx, workerConfig(small.s, signer, bare, o.concurrency), z.memWarm, z.memSmall)
	if err != nil {
		return row{}, err
	}
	largeHeap, err := workerHeap(ctx, workerConfig(large.s, signer, bare, o.concurrency), z.memWarm, z.claimSizes[len(z.claimSizes)-1])
	if err != nil {
		return row{}, err
	}
	ratio := float64(largeHeap) / float64(smallHeap)
	return row{
		id: "6", name: fmt.Sprintf("worker heap in use: %s due vs %s due", count(z.claimSizes[len(z.claimSizes)-1]), count(z.memSmall)), engine: e.name,
		courier: fmtBytes(largeHeap), baseline: fmtBytes(smallHeap), ratio: fmt.Sprintf("%.2fx", ratio),
		target: fmt.Sprintf("<= %.2fx", memoryGrowth), pass: ratio <= memoryGrowth,
		detail: fmt.Sprintf("heap in use before the workers ran %s; max of %d samples while delivering", fmtBytes(idle), memSamples),
	}, nil
}

// memSamples is how many heap readings a worker run takes, memInterval
// apart.
const (
	memSamples  = 5
	memInterval = 100 * time.Millisecond
)

// workerHeap runs a worker on an outbox of backlog due rows until warm
// attempts have settled, then reads the heap in use memSamples times and
// returns the largest reading. The backlog must outlast the readings.
func workerHeap(ctx context.Context, cfg client.Config, warm, backlog int) (uint64, error) {
	var settled atomic.Int64
	cfg.Hook = func(client.Event) { settled.Add(1) }
	w, err := client.NewWorker(cfg)
	if err != nil {
		return 0, err
	}
	runCtx, stop := context.WithTimeout(ctx, runLimit)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	for settled.Load() < int64(warm) && runCtx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	var most uint64
	for range memSamples {
		most = max(most, heapInUse())
		time.Sleep(memInterval)
	}
	n := settled.Load()
	stop()
	if err := <-ran; err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if n < int64(warm) || n >= int64(backlog) {
		return 0, fmt.Errorf("worker settled %d attempts of a %d backlog: the readings were not taken while it delivered", n, backlog)
	}
	return most, nil
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// count formats a row count: 1k, 10k, 1M.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
