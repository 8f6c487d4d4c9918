package crash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// RunSender is the body of a sender process: it delivers the outbox with
// a client.Worker and, beside it, enqueues the run's notifications, each
// in a business transaction of its own, until ctx is done. ready is called
// once the worker runs.
func RunSender(ctx context.Context, s Spec, logger *slog.Logger, ready func()) error {
	st, q, key, err := s.open(ctx)
	if err != nil {
		return err
	}
	defer Close(st)
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return err
	}
	guard, err := Guard(s.Addr)
	if err != nil {
		return err
	}
	transport := guard.Transport()
	defer (&http.Client{Transport: transport}).CloseIdleConnections()
	var workers []*client.Worker
	for _, owner := range Owners(s) {
		w, err := client.NewWorker(client.Config{
			Store:        st,
			Owner:        owner,
			Concurrency:  WorkerConcurrency,
			Lease:        WorkerLease,
			Timeout:      WorkerTimeout,
			PollInterval: WorkerPoll,
			Backoff:      WorkerBackoff,
			Signer:       signer,
			Transport:    transport,
			Logger:       logger,
		})
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	worker := make(chan error, len(workers))
	for _, w := range workers {
		go func() { worker <- w.Run(ctx) }()
	}
	wait := func() error {
		var errs []error
		for range workers {
			errs = append(errs, <-worker)
		}
		return errors.Join(errs...)
	}
	ready()

	if err := enqueueAll(ctx, st, q["insert_order"], s, logger); err != nil && ctx.Err() == nil {
		cancel()
		wait()
		return err
	}
	<-ctx.Done()
	return wait()
}

// Owners names the workers of the sender's incarnation: one, or in
// ModeControl two (the endpoint limits then bound claims of two owners).
func Owners(s Spec) []string {
	if s.Mode == ModeControl {
		return []string{Owner(s.Incarnation), Owner(s.Incarnation) + "-b"}
	}
	return []string{Owner(s.Incarnation)}
}

// Owner names the worker of the sender's incarnation in leases and the
// attempts log.
func Owner(incarnation int) string { return "sender-" + strconv.Itoa(incarnation) }

// enqueueAll writes every notification's business transaction. Those a
// previous sender committed are no-ops and go at once; new ones are spread
// over s.EnqueueWindow. A transaction the database ends busy is run again
// (retryBusy), as an application would.
func enqueueAll(ctx context.Context, st *store.Store, insertOrder string, s Spec, logger *slog.Logger) error {
	var pace <-chan time.Time
	if s.EnqueueWindow > 0 && s.N > 0 {
		t := time.NewTicker(max(s.EnqueueWindow/time.Duration(s.N), time.Microsecond))
		defer t.Stop()
		pace = t.C
	}
	for i := range s.N {
		var existed bool
		err := retryBusy(ctx, logger, businessTries, i, func() (err error) {
			existed, err = enqueueOne(ctx, st, insertOrder, s, i)
			return err
		})
		if err != nil {
			return fmt.Errorf("crash: notification %d: %w", i, err)
		}
		if existed || pace == nil {
			continue
		}
		select {
		case <-pace:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// businessTries bounds the tries of one business transaction that the
// database keeps answering busy: on SQLite each try has waited for the
// write lock for the store's busy timeout already.
const businessTries = 5

// BusyRetryMessage is what a sender logs (at level Warn) each time it
// runs a business transaction again that the database ended busy.
const BusyRetryMessage = "crash: business transaction busy, trying it again"

// retryBusy runs try, business transaction i, up to tries times while it
// fails busy (see busy), logging each retry, and returns its last error.
// Any other error, and a busy one once ctx is done, ends it at once. A try
// that failed was rolled back whole, the order row with its enqueues, so
// the next one starts from what committed before it: nothing of i, or,
// should a busy commit have committed after all, the order and its
// deliveries, which the next try writes again as no-ops.
func retryBusy(ctx context.Context, logger *slog.Logger, tries, i int, try func() error) error {
	for n := 1; ; n++ {
		err := try()
		if err == nil || !busy(err) || n >= tries || ctx.Err() != nil {
			return err
		}
		logger.WarnContext(ctx, BusyRetryMessage, slog.Int("notification", i), slog.Int("try", n), slog.Int("tries", tries), slog.Any("error", err))
	}
}

// busy reports whether err ended a business transaction on a lock or a
// conflict that another try may pass: SQLite's busy or locked (the write
// lock stayed with another connection for the whole busy timeout), or
// PostgreSQL's serialization failure, deadlock or lock not available.
// Courier's statements report these as courier.CodeDatabaseUnavailable
// with the driver's error kept in the chain; the harness's own statements
// as the driver's error alone. Nothing else is busy: an error with
// another code of courier's, or any other failure of the database.
func busy(err error) bool {
	if code := courier.CodeOf(err); code != "" && code != courier.CodeDatabaseUnavailable {
		return false
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "55P03"
	}
	return false
}

// enqueueOne runs notification i's business transaction: the order row
// and the enqueue commit together, or, for the orders RolledBack picks,
// are rolled back together. existed reports a no-op: a previous sender
// committed it.
func enqueueOne(ctx context.Context, st *store.Store, insertOrder string, s Spec, i int) (existed bool, err error) {
	n, payload, err := Notification(s.Seed, i)
	if err != nil {
		return false, err
	}
	orderID, err := OrderID(s.Mode, s.Seed, i)
	if err != nil {
		return false, err
	}
	tx, err := st.DB().BeginTxx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() // after Commit, a no-op
	if _, err := tx.ExecContext(ctx, insertOrder, i, orderID, time.Now().UnixMicro()); err != nil {
		return false, err
	}
	if s.Mode == ModeControl {
		existed, err = enqueueControl(ctx, st, tx, s, i)
	} else {
		var e store.Enqueued
		e, err = st.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
			NotificationID: n.NotificationID,
			Endpoint:       s.Endpoint(),
			Payload:        payload,
			Profile:        ack.ProfileTerminal,
		})
		existed = e.Existed
	}
	if err != nil {
		return false, err
	}
	if RolledBack(s.Seed, i) {
		return false, tx.Rollback()
	}
	return existed, tx.Commit()
}
