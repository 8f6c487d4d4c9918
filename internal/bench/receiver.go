package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/signature"
)

// receiverConns is the number of concurrent connections the
// receiver target is stated at.
const receiverConns = 64

// receiverServer serves handler.NewReceiver, recording in a fresh
// database of e named label, with an application function that does
// nothing.
func receiverServer(ctx context.Context, e *engine, label string, verifier signature.Verifier) (*httptest.Server, error) {
	d, err := e.open(ctx, label)
	if err != nil {
		return nil, err
	}
	rc, err := handler.NewReceiver(handler.ReceiverConfig{Store: d.s, Verifier: verifier},
		func(context.Context, *sqlx.Tx, note) error { return nil })
	if err != nil {
		return nil, err
	}
	return httptest.NewServer(rc), nil
}

// benchReceiver is figure 3: handler.NewReceiver (signature verification,
// strict decoding and validation, Inbox dedupe and the Ack in one
// transaction) against the bare receiver, which writes the same Ack with
// no check and no database. Both get the same signed requests, each a new
// notification, from 64 keep-alive connections.
func benchReceiver(ctx context.Context, e *engine, z sizes, bare *httptest.Server, signer signature.Signer, verifier signature.Verifier) (row, error) {
	srv, err := receiverServer(ctx, e, "inbox", verifier)
	if err != nil {
		return row{}, err
	}
	defer srv.Close()

	var courier, baseline runs
	for r := range z.receiverRounds {
		ns := ids(fmt.Sprintf("r%d-", r), z.receiverN)
		reqs, err := signedRequests(signer, ns, func(i int) []byte { return benchkit.Payload(ns[i]) })
		if err != nil {
			return row{}, err
		}
		bareRun := func() error {
			return baseline.measure(len(reqs), func() (time.Duration, error) { return postLoop(ctx, bare.URL, reqs, receiverConns) })
		}
		courierRun := func() error {
			return courier.measure(len(reqs), func() (time.Duration, error) { return postLoop(ctx, srv.URL, reqs, receiverConns) })
		}
		if err := alternate(r, bareRun, courierRun); err != nil {
			return row{}, fmt.Errorf("%s receiver round %d: %w", e.name, r+1, err)
		}
		progress("  round %d: receiver %.0f/s, bare handler %.0f/s", r+1, courier.last(), baseline.last())
	}
	rw := throughputRow("3", fmt.Sprintf("receiver (verify+inbox) vs bare Ack handler (%d conns, %d req)", receiverConns, z.receiverN),
		e.name, courier, baseline, 0.40)
	rw.detail = cpuDetail(courier, baseline)
	return rw, nil
}
