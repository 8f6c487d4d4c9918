package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// benchDurability is figure 7, the price of the store's default
// durability on SQLite: a commit with synchronous=FULL (store.DurabilityFull,
// the default: an Ack or an enqueue survives power loss) against one with
// synchronous=NORMAL (store.DurabilityRelaxed: WAL commits reach the disk
// at the next checkpoint, so the last ones can roll back after an OS
// crash). Both sides are courier, on two fresh files in the same folder,
// in alternating blocks: 7a enqueues one notification per transaction
// through Store.Begin, 7b is the receiver of figure 3. The ratio is the
// relaxed side's cost over the durable side's, so a figure below 100% is
// what durability costs.
func benchDurability(ctx context.Context, e *engine, z sizes, signer signature.Signer, verifier signature.Verifier) ([]row, error) {
	relaxed := &engine{name: e.name, dir: e.dir, durability: store.DurabilityRelaxed}
	defer relaxed.closeAll()

	full, err := e.open(ctx, "durability-full")
	if err != nil {
		return nil, err
	}
	fast, err := relaxed.open(ctx, "durability-relaxed")
	if err != nil {
		return nil, err
	}
	enqueue := func(d *database, prefix string, n int, out *runs) func() error {
		return func() error {
			return out.measure(n, func() (time.Duration, error) {
				start := time.Now()
				for i := range n {
					tx, err := d.s.Begin(ctx)
					if err != nil {
						return 0, err
					}
					id := prefix + strconv.Itoa(i)
					if _, err := d.s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: enqueueEndpoint, Payload: benchkit.Payload(id)}); err != nil {
						tx.Rollback()
						return 0, err
					}
					if err := tx.Commit(); err != nil {
						return 0, err
					}
				}
				return time.Since(start), nil
			})
		}
	}
	ops := z.enqueueOps[e.name] * 10
	var durableEnq, relaxedEnq runs
	for r := range z.enqueueRounds / 4 {
		if err := alternate(r,
			enqueue(full, fmt.Sprintf("f%d-", r), ops, &durableEnq),
			enqueue(fast, fmt.Sprintf("r%d-", r), ops, &relaxedEnq)); err != nil {
			return nil, fmt.Errorf("durability enqueue round %d: %w", r+1, err)
		}
	}

	fullSrv, err := receiverServer(ctx, e, "durability-inbox-full", verifier)
	if err != nil {
		return nil, err
	}
	defer fullSrv.Close()
	fastSrv, err := receiverServer(ctx, relaxed, "durability-inbox-relaxed", verifier)
	if err != nil {
		return nil, err
	}
	defer fastSrv.Close()
	var durableRcv, relaxedRcv runs
	for r := range z.receiverRounds {
		ns := ids(fmt.Sprintf("d%d-", r), z.receiverN)
		reqs, err := signedRequests(signer, ns, func(i int) []byte { return benchkit.Payload(ns[i]) })
		if err != nil {
			return nil, err
		}
		post := func(url string, out *runs) func() error {
			return func() error {
				return out.measure(len(reqs), func() (time.Duration, error) { return postLoop(ctx, url, reqs, receiverConns) })
			}
		}
		if err := alternate(r, post(fullSrv.URL, &durableRcv), post(fastSrv.URL, &relaxedRcv)); err != nil {
			return nil, fmt.Errorf("durability receiver round %d: %w", r+1, err)
		}
		progress("  round %d: receiver durable %.0f/s, relaxed %.0f/s", r+1, durableRcv.last(), relaxedRcv.last())
	}
	return []row{
		durabilityRow("7a", fmt.Sprintf("enqueue, one per tx: durable (FULL) vs relaxed (NORMAL) commits (%d blocks of %d tx)", len(durableEnq.rates), ops), e.name, durableEnq, relaxedEnq),
		durabilityRow("7b", fmt.Sprintf("receiver: durable (FULL) vs relaxed (NORMAL) inbox commits (%d conns, %d req)", receiverConns, z.receiverN), e.name, durableRcv, relaxedRcv),
	}, nil
}

// durabilityRow shows the durable side's rate as a share of the relaxed
// side's: there is no target, since durability is not negotiable by
// default; the figure is its price.
func durabilityRow(id, name, eng string, durable, relaxed runs) row {
	rw := throughputRow(id, name, eng, durable, relaxed, 0)
	rw.target, rw.info = "-", true
	rw.detail = cpuDetail(durable, relaxed)
	return rw
}
