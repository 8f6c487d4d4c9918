package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/testmain"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// TestRun runs the example twice on one database: the second run delivers
// its own notifications and is not confused by the first's.
func TestRun(t *testing.T) {
	url := pgtest.URL(t)
	for i := range 2 {
		var out bytes.Buffer
		ok, err := run(t.Context(), options{url: url, addr: "127.0.0.1:0", n: 300, batch: 40, timeout: time.Minute}, &out)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		if !ok || !strings.Contains(out.String(), "verdict: OK") {
			t.Fatalf("run %d did not succeed:\n%s", i, out.String())
		}
		t.Logf("run %d:\n%s", i, out.String())
	}
}

// TestURLPasswordNotFromFlag: -url was the way to pass the database, with
// its password on the command line, where ps shows it to every user of the
// machine. A password is taken from $COURIER_PG_URL only.
func TestURLPasswordNotFromFlag(t *testing.T) {
	for _, tc := range []struct {
		flag, env, want string
		refused         bool
	}{
		{flag: "postgres://app:s3cret@db:5432/scratch", refused: true},
		{flag: "postgresql://app@db/scratch?sslmode=disable&password=s3cret", refused: true},
		{flag: "host=db user=app password=s3cret dbname=scratch", refused: true},
		{flag: "postgres://app@db/scratch", env: "postgres://app:s3cret@db/other", want: "postgres://app@db/scratch"},
		{env: "postgres://app:s3cret@db/scratch", want: "postgres://app:s3cret@db/scratch"},
		{refused: true},
	} {
		got, err := databaseURL(tc.flag, tc.env)
		if refused := err != nil; refused != tc.refused || got != tc.want {
			t.Errorf("databaseURL(%q, %q) = %q, %v; want %q, refused %v", tc.flag, tc.env, got, err, tc.want, tc.refused)
		}
	}
}

// TestInterruptFinishesAttemptsInFlight: at Ctrl-C the example cancelled
// its worker's context, the hard stop, so the attempt in flight was cut
// short: settled as a retry with code worker_stopped and counted against
// the delivery's budget, the receiver's work rolled back. The worker is
// now stopped softly (client.Worker.Stop): the attempt in flight runs to
// its end and its delivery succeeds.
func TestInterruptFinishesAttemptsInFlight(t *testing.T) {
	url := pgtest.URL(t)
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	stopping := make(chan struct{})
	var once sync.Once
	o := options{url: url, addr: "127.0.0.1:0", n: 1, batch: 1, timeout: time.Minute,
		// The worker logs "worker: stopping" once Stop is called.
		logger: slog.New(logtest.OnMessage{Msg: "worker: stopping", Do: func() { once.Do(func() { close(stopping) }) }}),
		onReceive: func(rctx context.Context) error {
			interrupt() // Ctrl-C, with this attempt in flight
			select {
			case <-stopping: // stopped softly: the attempt goes on
				return nil
			case <-rctx.Done(): // cut short
				return context.Cause(rctx)
			}
		},
	}
	_, err := run(ctx, o, io.Discard)
	t.Logf("the interrupted run returned %v", err)

	s, closeStore, err := openStore(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	page, err := s.Outbox.List(t.Context(), store.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Deliveries) != 1 {
		t.Fatalf("%d deliveries, want 1", len(page.Deliveries))
	}
	d := page.Deliveries[0]
	attempts, err := s.Outbox.Attempts(t.Context(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range attempts {
		if a.ErrorCode == courier.CodeWorkerStopped {
			t.Fatalf("the attempt in flight at the interrupt was cut short: delivery %s, attempt %d %s %s", d.Status, a.Attempt, a.Outcome, a.ErrorCode)
		}
	}
	if d.Status != courier.StatusSucceeded || d.Attempts != 1 {
		t.Fatalf("delivery %s after %d attempts (%s), want succeeded after 1", d.Status, d.Attempts, d.LastErrorCode)
	}
	var received int
	if err := s.DB().GetContext(t.Context(), &received, "SELECT COUNT(*) FROM example_received"); err != nil || received != 1 {
		t.Fatalf("the receiver applied it %d times (%v), want once", received, err)
	}
}

// TestCloseEndsTheStore: the example closed its database and never its
// Store, which store.Open leaves open with the database given to it. A
// worker still running on the Store then went on claiming (and failing)
// forever; Store.Close is what tells it the Store is gone. Now the
// example closes the Store, then the database: a Run left going returns
// database_unavailable at once.
func TestCloseEndsTheStore(t *testing.T) {
	url := pgtest.URL(t)
	s, closeStore, err := openStore(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	key, err := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- w.Run(context.WithoutCancel(t.Context())) }()
	if err := closeStore(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ran:
		if !errors.Is(err, courier.CodeDatabaseUnavailable) {
			t.Fatalf("Run returned %v after the close, want database_unavailable", err)
		}
	case <-time.After(10 * time.Second): // a bound on a failure, not a wait: Run hears of a Store's Close at once
		stop, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		_ = w.Stop(stop)
		<-ran
		t.Fatal("a worker's Run still going 10 s after the example closed its store: the Store was never closed")
	}
}
