// Package cluster proves courier's guarantees with several worker processes
// on one PostgreSQL database.
//
// The tests (cluster_test.go) start real worker processes by running the
// test binary again with -test.run=^TestHelperWorkerProcess$ and a
// WorkerSpec in the environment; that helper calls RunWorker, which
// delivers the outbox until the process's stdin closes or it gets a
// signal. This file holds what both sides of that exchange share.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// Environment of a worker process. EnvWorker set to "1" makes the test
// binary act as a worker; the others carry the WorkerSpec.
const (
	EnvWorker   = "COURIER_CLUSTER_WORKER"
	EnvDatabase = "COURIER_CLUSTER_DATABASE_URL"
	EnvReceiver = "COURIER_CLUSTER_RECEIVER_URL"
	EnvSecret   = "COURIER_CLUSTER_SECRET"
	EnvOwner    = "COURIER_CLUSTER_OWNER"
)

// Settings of every worker process.
const (
	WorkerConcurrency = 16
	WorkerBatchSize   = 32
)

// ReadyLine is what a worker process prints on stdout once its worker is
// built and about to run.
const ReadyLine = "courier-cluster-worker ready"

// WorkerSpec is what a worker process is told through its environment.
type WorkerSpec struct {
	DatabaseURL string // the sender's outbox, already migrated
	ReceiverURL string // base URL of the receiver (http://127.0.0.1:port)
	Secret      string // Standard Webhooks secret ("whsec_…") to sign with
	Owner       string // the worker's name in leases and the attempts log
}

// Environ returns s as environment entries for a worker process.
func (s WorkerSpec) Environ() []string {
	return []string{
		EnvWorker + "=1",
		EnvDatabase + "=" + s.DatabaseURL,
		EnvReceiver + "=" + s.ReceiverURL,
		EnvSecret + "=" + s.Secret,
		EnvOwner + "=" + s.Owner,
	}
}

// SpecFromEnv reads the WorkerSpec of this process. ok is false when the
// process is not a worker process (EnvWorker is not "1").
func SpecFromEnv() (s WorkerSpec, ok bool, err error) {
	if os.Getenv(EnvWorker) != "1" {
		return WorkerSpec{}, false, nil
	}
	s = WorkerSpec{
		DatabaseURL: os.Getenv(EnvDatabase),
		ReceiverURL: os.Getenv(EnvReceiver),
		Secret:      os.Getenv(EnvSecret),
		Owner:       os.Getenv(EnvOwner),
	}
	if s.DatabaseURL == "" || s.ReceiverURL == "" || s.Secret == "" || s.Owner == "" {
		return WorkerSpec{}, true, errors.New("cluster: worker environment incomplete")
	}
	return s, true, nil
}

// RunWorker delivers the outbox at s.DatabaseURL until ctx is done, with
// the worker settings every cluster process shares. ready is called once
// the worker is built, just before it runs.
func RunWorker(ctx context.Context, s WorkerSpec, logger *slog.Logger, ready func()) error {
	db, err := sqlx.Open(postgres.DriverName, s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("cluster: open: %w", err)
	}
	defer db.Close()
	// One connection per attempt settling at once, one for the claim and
	// one held by the LISTEN; kept idle rather than reopened.
	db.SetMaxOpenConns(WorkerConcurrency + 4)
	db.SetMaxIdleConns(WorkerConcurrency + 4)
	st, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		return err
	}
	key, err := signature.ParseStandardWebhooksKey("cluster", s.Secret)
	if err != nil {
		return err
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return err
	}
	transport := couriertest.Guard(s.ReceiverURL).Transport()
	defer (&http.Client{Transport: transport}).CloseIdleConnections()
	w, err := client.NewWorker(client.Config{
		Store:       st,
		Owner:       s.Owner,
		Signer:      signer,
		Transport:   transport,
		Concurrency: WorkerConcurrency,
		BatchSize:   WorkerBatchSize,
		Logger:      logger,
	})
	if err != nil {
		return err
	}
	ready()
	return w.Run(ctx)
}
