package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// Commands, end to end: a website host enqueues each command in its own
// transaction (Outbox.EnqueueCommand), a worker delivers it, and the
// source applies it once and answers with an ack.CommandResponse the
// worker verifies against what it sent. The first attempt's connection is
// dropped after the source committed: the redelivery gets the stored
// response, and the command is not applied twice.
func ExampleNewSource() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	host, err := sqlite.Open(ctx, filepath.Join(dir, "host.db"), store.Config{}) // the host's outbox
	if err != nil {
		panic(err)
	}
	defer host.Close()
	source, err := sqlite.Open(ctx, filepath.Join(dir, "source.db"), store.Config{}) // the source's inbox
	if err != nil {
		panic(err)
	}
	defer source.Close()
	keys := couriertest.StandardWebhooksKeys("cms-host")
	contract := ack.Digest([]byte("the source contract v1"))

	src, err := handler.NewSource(handler.SourceConfig{Store: source, Verifier: keys.Verifier, CapabilitiesSHA256: contract},
		func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
			fmt.Println("applying", c.Operation, c.RequestID, string(c.Body))
			return nil // write the change with tx
		})
	if err != nil {
		panic(err)
	}
	srv := couriertest.NewServer(src, couriertest.Sequence(couriertest.Fault{DropAfterCommit: true}))
	defer srv.Close()

	cmd, err := ack.NewCommand(ack.Command{
		Operation: ack.OperationChange, RequestID: "req-1", SourceMaxAttempts: 5,
		CapabilitiesSHA256: contract, Body: json.RawMessage(`{"title":"Spring sale"}`),
	})
	if err != nil {
		panic(err)
	}
	payload, err := cmd.Payload()
	if err != nil {
		panic(err)
	}
	tx, err := host.Begin(ctx)
	if err != nil {
		panic(err)
	}
	if _, err := host.Outbox.EnqueueCommand(ctx, tx, store.CommandParams{Endpoint: srv.URL + "/commands", Payload: payload}); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}

	w, err := client.NewWorker(client.Config{Store: host, Signer: keys.Signer, Transport: srv.Guard().Transport(),
		Backoff: func(int, time.Duration) time.Duration { return 0 }})
	if err != nil {
		panic(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		panic(err)
	}
	h, err := host.Outbox.Health(ctx)
	if err != nil {
		panic(err)
	}
	st := srv.Stats()
	fmt.Println("succeeded:", h.Counts[courier.StatusSucceeded], "requests:", st.Requests, "dropped:", st.Dropped)
	// Output:
	// applying change req-1 {"title":"Spring sale"}
	// succeeded: 1 requests: 2 dropped: 1
}
