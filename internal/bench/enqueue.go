package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/courier-go/courier/store"
)

// enqueueEndpoint is where the enqueue figure's rows would go; nothing is
// delivered.
const enqueueEndpoint = "https://receiver.example/hooks/courier"

// benchEnqueue is figure 1: one Outbox.Enqueue in a transaction of the
// caller's (BEGIN, enqueue, COMMIT), against a plain INSERT of the same
// row (same columns and values, the digest computed in Go) in the same
// kind of transaction on the same table; on SQLite, which keeps the
// payload in a table of its own (migration 13), two plain INSERTs. Short blocks of each alternate,
// so that a burst of load from elsewhere on the machine falls on both.
// The costs shown are the medians of the blocks' mean cost per
// transaction; the ratio is the median of the ratios of adjacent blocks.
func benchEnqueue(ctx context.Context, e *engine, z sizes) (row, error) {
	d, err := e.open(ctx, "enqueue")
	if err != nil {
		return row{}, err
	}
	insert := d.db.Rebind(`INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_key_id, payload_sha256,
    profile, key_id, status, priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at)
VALUES (?, ?, ?, '', ?, 'courier', '', 'pending', 0, 0, ?, ?, ?, ?, ?)`)
	var insertPayload string // SQLite's payload, in its table
	if d.engine == "sqlite" {
		insert = `INSERT INTO courier_outbox (notification_id, endpoint, payload_key_id, payload_sha256,
    profile, key_id, status, priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at)
VALUES (?1, ?2, '', ?4, 'courier', '', 'pending', 0, 0, ?5, ?6, ?7, ?8, ?9)`
		insertPayload = `INSERT INTO courier_outbox_payload (id, payload) VALUES (?, ?)`
	}
	horizon := retryHorizon.Microseconds()

	plain := func(id string) error {
		now := time.Now().UnixMicro()
		sum := sha256.Sum256(benchPayload)
		tx, err := d.db.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, insert, id, enqueueEndpoint, benchPayload, hex.EncodeToString(sum[:]),
			maxAttempts, now, now+horizon, now, now)
		if err == nil && insertPayload != "" {
			var row int64
			if row, err = res.LastInsertId(); err == nil {
				_, err = tx.ExecContext(ctx, insertPayload, row, benchPayload)
			}
		}
		if err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	enqueue := func(id string) error {
		tx, err := d.db.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := d.s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: enqueueEndpoint, Payload: benchPayload}); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	ops := z.enqueueOps[e.name]
	measure := func(prefix string, fn func(string) error, n int, out, cpu *[]time.Duration) func() error {
		return func() error {
			start, c0 := time.Now(), processCPU()
			for i := range n {
				if err := fn(prefix + strconv.Itoa(i)); err != nil {
					return err
				}
			}
			if out != nil {
				*out = append(*out, time.Since(start)/time.Duration(n))
				*cpu = append(*cpu, (processCPU()-c0)/time.Duration(n))
			}
			return nil
		}
	}
	// Warm both paths (connections, statement caches, table pages).
	if err := alternate(0, measure("wp-", plain, ops, nil, nil), measure("we-", enqueue, ops, nil, nil)); err != nil {
		return row{}, err
	}
	var courier, baseline, courierCPU, baselineCPU []time.Duration
	for r := range z.enqueueRounds {
		p := measure(fmt.Sprintf("p%d-", r), plain, ops, &baseline, &baselineCPU)
		q := measure(fmt.Sprintf("e%d-", r), enqueue, ops, &courier, &courierCPU)
		if err := alternate(r, p, q); err != nil {
			return row{}, fmt.Errorf("%s enqueue round %d: %w", e.name, r+1, err)
		}
	}
	rw := costRowRatio("1", fmt.Sprintf("enqueue in caller's tx vs plain INSERT (%d blocks of %d tx)", z.enqueueRounds, ops),
		e.name, median(courier), median(baseline), median(pairedRatios(courier, baseline)), 1.3)
	rw.detail = fmt.Sprintf("wall per tx over the blocks p10/p50/p90: enqueue %s, plain INSERT %s; process CPU per tx (median): enqueue %s, plain INSERT %s",
		spread(courier), spread(baseline), fmtDuration(median(courierCPU)), fmtDuration(median(baselineCPU)))
	return rw, nil
}

// spread formats the 10th, 50th and 90th percentiles of ds.
func spread(ds []time.Duration) string {
	return fmt.Sprintf("%s/%s/%s", fmtDuration(percentile(ds, 10)), fmtDuration(percentile(ds, 50)), fmtDuration(percentile(ds, 90)))
}
