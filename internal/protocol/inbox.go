package protocol

import (
	"context"
	"database/sql"
	"time"

	"github.com/courier-go/courier"
)

// DBTX is the transaction a receiver records in: *sql.Tx, *sqlx.Tx and
// the like (the same as store.DBTX).
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Inbox is the store side of the receivers' protocol: one record per
// (verified sender, dedupe key), written in the transaction of the
// application's own effects, so that a redelivery is answered from the
// record and never processed twice.
type Inbox interface {
	// Tracer is the Store's tracer (store.Config.Tracer), nil for none:
	// the receivers trace with it.
	Tracer() courier.Tracer
	// Record records k inside tx, or reports what is already recorded. A
	// key recorded with another payload digest is
	// courier.CodeIdempotencyCollision, with nothing written. A concurrent
	// duplicate waits for the first transaction and then sees it
	// completed.
	Record(ctx context.Context, tx DBTX, k InboxKey) (Receipt, error)
	// Find reports what is recorded for k, inside tx, writing nothing: a
	// Receipt as Record's for a key recorded with k's payload digest
	// (completed or in progress), and found false for a key recorded with
	// no such digest or not at all.
	Find(ctx context.Context, tx DBTX, k InboxKey) (r Receipt, found bool, err error)
	// RecordCompleted is Record and Complete in one statement, for a
	// receiver whose answer does not depend on what processing does.
	RecordCompleted(ctx context.Context, tx DBTX, k InboxKey, answer []byte) (Receipt, error)
	// Complete stores the answer for a key tx recorded fresh.
	Complete(ctx context.Context, tx DBTX, k InboxKey, answer []byte) error
	// Claim is the first phase of a two-phase receipt, committed on its
	// own, so a concurrent duplicate sees the key in progress at once. A
	// claim left processing longer than stale is taken over; claims are
	// fenced, so only one completes.
	Claim(ctx context.Context, k InboxKey, stale time.Duration) (Receipt, InboxClaim, error)
	// CompleteClaim stores the answer for a claim inside tx; a claim taken
	// over meanwhile is courier.CodeLeaseLost.
	CompleteClaim(ctx context.Context, tx DBTX, c InboxClaim, answer []byte) error
	// ReleaseClaim gives a claim back after processing failed, so the
	// sender's retry processes the notification again.
	ReleaseClaim(ctx context.Context, c InboxClaim) error
	// Unavailable reports whether err, returned by the application's
	// function for a statement in a receiver's transaction, is the
	// database failing rather than the function: a store method's
	// courier.CodeDatabaseUnavailable, or a driver error the engine reads
	// as a lock conflict, a read-only or full database, an I/O error or
	// the server shutting down.
	Unavailable(err error) bool
}

// InboxKey identifies one received notification.
type InboxKey struct {
	Sender        string // the verified sender, never taken from the payload
	Key           string // the notification's dedupe key
	PayloadSHA256 string // digest of what was received under it
}

// Receipt says what the Inbox knew of a key when it was recorded.
type Receipt struct {
	// Fresh: this call recorded (or claimed) the key; the caller processes
	// the notification.
	Fresh bool
	// InProgress: another request holds the key and has not completed it;
	// the caller answers 503 and the sender retries.
	InProgress bool
	// Ack is the stored answer of a completed duplicate, to answer byte
	// for byte.
	Ack []byte
	// Token is a fresh record's fencing token, as an InboxClaim's: the
	// record's updated_at as this call stamped it.
	Token int64
}

// InboxClaim is a held two-phase claim: the key and the claim's fencing
// token.
type InboxClaim struct {
	Key   InboxKey
	Token int64
}

var inboxOf func(store any) Inbox

// RegisterInbox is called by package store, once, with the function that
// returns a *store.Store's side of the receivers' protocol.
func RegisterInbox(f func(store any) Inbox) { inboxOf = f }

// InboxFor returns the receivers' protocol of s, a *store.Store.
func InboxFor(s any) Inbox { return inboxOf(s) }

// WrapInbox makes InboxFor return wrap(s, its Inbox) until restore is
// called: a test's way to put a fault in front of one Store's Inbox. It
// changes what every caller of InboxFor gets: a test that calls it must
// not run in parallel with others, and its wrap must pass other Stores'
// Inboxes through unchanged.
func WrapInbox(wrap func(s any, in Inbox) Inbox) (restore func()) {
	orig := inboxOf
	inboxOf = func(s any) Inbox { return wrap(s, orig(s)) }
	return func() { inboxOf = orig }
}
