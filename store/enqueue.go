package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/store/internal/engine"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/tracing"
)

// Limits on what Enqueue accepts.
const (
	// MaxPayloadSize bounds a payload's bytes: 4 MiB. A receiver reads 1
	// MiB unless configured otherwise (middleware.BodyLimits.MaxBytes),
	// so a larger payload is for receivers configured to read it.
	MaxPayloadSize = 4 << 20
	// MaxEndpointSize bounds an endpoint URL's bytes: 2048.
	MaxEndpointSize = endpoint.MaxSize
	// MaxHorizon bounds how far ahead a delivery may be planned: its
	// NotBefore at most MaxHorizon after now, its Deadline at most
	// MaxHorizon after its first attempt is due, and Config.RetryHorizon.
	// Thirty days is ten times the default horizon and covers any retry
	// schedule (Standard Webhooks' eight attempts span about 27 hours), while
	// every delivery still ends, and every receiver's dedupe window can
	// cover its retries, within a bounded time. A time beyond it is a
	// mistake (a unit, a zero value) rather than a plan.
	MaxHorizon  = 30 * 24 * time.Hour
	maxAttempts = engine.MaxAttempts
)

// Outbox is the sender side's table of deliveries: one row per
// notification and endpoint, written in the application's transaction,
// delivered by a client.Worker.
type Outbox struct {
	s          *Store
	checkMu    sync.Mutex
	checkAfter int64 // the last delivery Check validated; 0 to start over
	keys       staleKeys
	// parkedDue is when (the Store's clock, unix microseconds) a claim
	// next looks for parked deliveries whose deadline has come
	// (claimRun.expireParked).
	parkedDue atomic.Int64
}

// EnqueueParams describes one delivery: a notification to one endpoint.
// Enqueue refuses, with code invalid_argument naming the field, what
// could only fail later at every attempt.
type EnqueueParams struct {
	// NotificationID is the notification's identity, the receiver's dedupe
	// key: 1–256 of A-Z a-z 0-9 _ . : -. A receiver dedupes per verified
	// sender, not per Store: every Store that signs as one sender (one per
	// region, or a database rebuilt from scratch) must give each
	// notification an id of its own, or the receiver answers the second
	// as the first's duplicate, or as idempotency_collision when its
	// payload differs.
	NotificationID string
	// Endpoint is the URL the notification is delivered to: an absolute
	// http or https URL with a host, at most MaxEndpointSize bytes, whose
	// port, if it names one, is one a dial can reach, 1 to 65535 (:0443
	// is port 443; port 0 or 65536 would fail every attempt), and whose
	// host is ASCII without a trailing dot: an internationalized name in
	// its A-label form (xn--…), the name a dial resolves, as net/http
	// dials a host of other characters (full-width letters, say) and a
	// resolver example.com. as another spelling of an ASCII name, which
	// would be another endpoint for one receiver. It is
	// stored, and sent to, with its scheme and host in lower case and
	// without the scheme's default port, and its other bytes as given:
	// https://Example.com:443/hook is the endpoint https://example.com/hook
	// (see Endpoints). The port and host are asked of an endpoint where it
	// enters the outbox (Enqueue, EnqueueMany, EnqueueCommand, a
	// subscription created or moved), not where one is named: an endpoint
	// stored before they were asked is still looked up, limited, redriven
	// and published to by its URL.
	Endpoint string
	// Payload is the exact bytes every attempt sends, 1 byte to
	// MaxPayloadSize. Every built-in profile's payload is JSON: for one of
	// them it must be one strict JSON document (no duplicate keys), as
	// courier's receivers read it. A courier receiver reads 1 MiB unless
	// its Body.MaxBytes says otherwise and answers a larger body 413, which
	// fails the delivery at its first attempt: a payload over 1 MiB is for
	// a receiver configured to read it. (Commands, whose receiver courier
	// makes, are held to 1 MiB: see EnqueueCommand.) A terminal
	// notification is validated whole (see Enqueue), and a command by
	// EnqueueCommand; an AdCP reporting envelope (ack.ProfileReporting)
	// is not, as the publish API (handler.NewPublish) sends any JSON
	// object to a reporting subscription, with an idempotency_key of the
	// delivery's own: ack.Validate an ack.Reporting before
	// enqueueing it, or a reporting receiver refuses it 400 at every
	// attempt and the delivery fails at its first.
	Payload []byte
	// Profile names the Ack the receiver must answer with: one of
	// Config.Profiles, by default package ack's Profile* names. Commands
	// (ack.ProfileCommand) are enqueued with EnqueueCommand. Defaults to
	// ack.ProfileCourier.
	Profile string
	// KeyID names the signing configuration the worker signs with (an id,
	// never key material): at most 256 bytes of UTF-8 text without NUL.
	// Optional. It is the delivery's for life, asked of
	// client.Config.SignerFor at every attempt: name a setup ("orders"),
	// not a key's version, and rotate keys behind the name (see package
	// signature, Rotating keys).
	KeyID string
	// Priority orders claims: lower first, within -2147483648..2147483647
	// (a 32-bit integer on every engine). Defaults to 0.
	Priority int
	// MaxAttempts is the attempt budget, 1..1000. Defaults to the Store's.
	// An attempt cut short as its worker stopped (worker_stopped) spares
	// it: the budget grows by one, up to 1000. The delivery keeps it as
	// asked: the same enqueue made again is compared with it, not with
	// the larger budget a Redrive or a stop gives, and one that left it
	// to the default is the same whatever the Store's Config.MaxAttempts
	// is by then.
	MaxAttempts int
	// NotBefore delays the first attempt, by at most MaxHorizon; a time in
	// the past means now. Defaults to now. Now, here and for Deadline, is
	// the Store's clock (Config.Now: on PostgreSQL the database server's),
	// not the host's: a time computed from time.Now carries the host's
	// skew from it (see the package doc's Clocks).
	NotBefore time.Time
	// Deadline ends the delivery: no attempt starts at or after it. A
	// delivery still unsent then fails with code expired, at its next
	// claim or when a retry would be due at or after it. It must come
	// after the first attempt, by at most MaxHorizon (the same enqueue
	// made again once it has passed finds the delivery written in time).
	// Defaults to the first attempt plus the Store's RetryHorizon.
	Deadline time.Time
	// OrderingKey orders the endpoint's deliveries that share it (an
	// entity's id, say): within (Endpoint, OrderingKey) a delivery is
	// claimable only once every delivery enqueued before it has finished
	// (succeeded, or suppressed or cancelled; a failed one as
	// Config.OrderingOnFailure says), so they reach the receiver one at
	// a time, in enqueue order. A retry holds its key, not the endpoint:
	// other keys, and deliveries without one, flow past it. Enqueues of
	// one key take turns (each waits on the key until the one before it
	// commits or rolls back), which is what gives them an order; on
	// PostgreSQL use it in READ COMMITTED transactions, the default.
	// A transaction holds each key it joined until it ends. The worker
	// never waits for it: a head of that key it finishes meanwhile stays
	// the key's head, and the next delivery waits, until a claim moves
	// the key on once the transaction has ended (soon, in the process
	// that finished the head; within 30 seconds in any other); an
	// operator's Cancel or Redrive of one of the key's deliveries waits
	// for it. So keep keyed enqueues in short transactions. One that
	// joins several keys should
	// join them by endpoint, then key (EnqueueMany and Publish do), the
	// order courier's own transactions take them in; in another order it
	// may meet another enqueue, a Publish or a Redrive in a deadlock,
	// which PostgreSQL ends by aborting one transaction (the application
	// retries its own).
	// 1-256 bytes of visible ASCII, no spaces. Defaults to none.
	OrderingKey string
}

// Enqueued is the result of an enqueue.
type Enqueued struct {
	ID      int64 // the delivery's id
	Existed bool  // the same delivery was already enqueued; nothing was written
}

// Enqueue adds a delivery inside the caller's transaction tx, so it exists
// exactly when the caller's own writes commit (tx may be a database or a
// connection instead: see DBTX). A tx already ended (committed, rolled
// back, or ended with the context it began with) is CodeInvalidArgument,
// saying so: enqueue in it before its Commit.
// Enqueueing the same (NotificationID, Endpoint) again with the same
// payload and settings is a no-op that returns the existing row, whatever happened to it since (a
// Redrive that gave it a fresh budget too); with a different payload or
// settings it is CodeIdempotencyCollision and the stored row is unchanged.
// So is enqueueing again a delivery, finished or not, whose payload was
// sealed under a key Config.Encryption no longer holds, or holds over
// other bytes: its payload cannot be compared, and the error names the
// key (see Encryption).
//
// Terminal notifications (ack.ProfileTerminal) are keyed by their event
// as well, as the reference keys them: while the outbox holds one for an
// event and endpoint, another terminal notification for that event to
// that endpoint (another status, sequence or lifecycle, hence another
// notification id) is CodeIdempotencyCollision too.
func (o *Outbox) Enqueue(ctx context.Context, tx DBTX, p EnqueueParams) (Enqueued, error) {
	if err := refuseNewEndpoint("Endpoint", p.Endpoint); err != nil {
		return Enqueued{}, err
	}
	return inOneTx(ctx, o.s, tx, func(tx DBTX) (Enqueued, error) { return o.enqueue(ctx, tx, p, subscriptionRef{}) })
}

// inOneTx runs write in tx when it is a transaction. Given a database or a
// connection of database/sql or sqlx instead (*sql.DB, *sqlx.DB,
// *sql.Conn, *sqlx.Conn), it runs write in a transaction of its own
// there, committed when write succeeds: an enqueue is several statements,
// and committed one by one a failure between them (a cancelled context, a
// lost connection) would leave a delivery written and not joined to its
// ordering key, never to be sent, which a retry would find as it was. A
// connection already in a transaction (the application's, begun on it) is
// refused (errConnInTx). Any other DBTX is the caller's to run statements
// through as it does: an application's handle may send them into the
// transaction its context carries, which a transaction of courier's own
// would step out of.
func inOneTx[T any](ctx context.Context, s *Store, tx DBTX, write func(DBTX) (T, error)) (T, error) {
	var zero T
	var db interface {
		BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
	}
	var conn *sql.Conn
	switch x := tx.(type) {
	case *sqlx.DB:
		db = x
	case *sql.DB:
		db = x
	case *sqlx.Conn:
		db = x
		if x != nil {
			conn = x.Conn
		}
	case *sql.Conn:
		db, conn = x, x
	}
	if db == nil || nilcheck.Nil(tx) || s.closed.Load() {
		return write(tx) // a transaction, or one write refuses
	}
	if conn != nil && s.connInTx(conn) {
		return zero, errConnInTx
	}
	own, err := db.BeginTx(ctx, s.dialect.txOptions)
	if err != nil {
		return zero, s.dialect.interpret("begin", err)
	}
	defer own.Rollback() // after a panic (an application's Build) too; none after Commit
	var enqueued []Event // reported once own commits (observeIn)
	s.uncommitted.Store(DBTX(own), &enqueued)
	defer s.uncommitted.Delete(DBTX(own))
	v, err := write(own)
	if err != nil {
		return zero, err
	}
	if err := own.Commit(); err != nil {
		return zero, s.dialect.interpret("commit", err)
	}
	for _, e := range enqueued {
		s.observe(e)
	}
	return v, nil
}

// errConnInTx is a connection given as a DBTX while a transaction is open
// on it. A transaction of courier's own would nest in it: PostgreSQL only
// warns of the BEGIN and courier's COMMIT would commit the application's
// writes with the delivery, which its own rollback would then no longer
// undo; SQLite refuses the BEGIN.
var errConnInTx = invalidArgument("the connection is in a transaction: pass that transaction (the *sql.Tx), not its connection")

// connInTx reports whether the engine tells that conn is in a
// transaction. A connection it cannot look at (closed, of another
// driver) is left to BeginTx.
func (s *Store) connInTx(conn *sql.Conn) bool {
	if s.dialect.InTx == nil {
		return false
	}
	in := false
	_ = conn.Raw(func(dc any) error {
		in = s.dialect.InTx(dc)
		return nil
	})
	return in
}

// EnqueueMany enqueues several deliveries in the caller's transaction, with
// Enqueue's rules for each, and returns their results in the order ps
// lists them. It writes them in one order whatever the order of ps, by
// endpoint, then ordering key, then notification id: two transactions
// enqueueing the same deliveries, listed in any order, do not wait for
// each other in a circle, which PostgreSQL would end by aborting one: the
// second waits for the first, and finds them Existed once it commits.
// Deliveries that share an endpoint and an ordering key are written in
// the order ps lists them, which is their key's order: batches that list
// them in other orders contradict each other, and may meet in such a
// circle. Deliveries without an ordering key are promised no order: they
// get their ids in the written order, not in ps's. It joins
// their ordering keys after it has written them all, in the order
// courier's own transactions take keys in, by endpoint and key, which
// several Enqueue calls in one transaction cannot promise (see
// EnqueueParams.OrderingKey). On error nothing is known to be written:
// the caller rolls back.
func (o *Outbox) EnqueueMany(ctx context.Context, tx DBTX, ps []EnqueueParams) ([]Enqueued, error) {
	for i, p := range ps {
		if err := refuseNewEndpoint("Endpoint", p.Endpoint); err != nil {
			return nil, fmt.Errorf("delivery %d: %w", i, err)
		}
	}
	return inOneTx(ctx, o.s, tx, func(tx DBTX) ([]Enqueued, error) { return o.enqueueMany(ctx, tx, ps) })
}

func (o *Outbox) enqueueMany(ctx context.Context, tx DBTX, ps []EnqueueParams) ([]Enqueued, error) {
	out := make([]Enqueued, len(ps))
	var joins []keyed
	for _, i := range insertOrder(ps) {
		e, err := o.insertDelivery(ctx, tx, ps[i], subscriptionRef{}, &joins)
		if err != nil {
			return nil, fmt.Errorf("delivery %d: %w", i, err)
		}
		out[i] = e
	}
	if err := o.joinAll(ctx, tx, joins); err != nil {
		return nil, err
	}
	return out, nil
}

// insertOrder returns the indexes of ps in the order EnqueueMany writes
// them: by endpoint, ordering key, then notification id, one order for
// every batch of the same deliveries. An insert waits for another
// transaction's uncommitted row of the same identity (the unique index),
// so two batches writing shared deliveries in opposite orders would each
// wait for the other. Deliveries of one (endpoint, ordering key) keep the
// order ps lists them in (the sort is stable and does not compare their
// ids): their ids, hence their key's order, are the order they are
// written. Deliveries without a key were promised no order: their ids
// follow this order, not ps's.
func insertOrder(ps []EnqueueParams) []int {
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		p, q := &ps[a], &ps[b]
		if c := cmp.Or(cmp.Compare(normalEndpoint(p.Endpoint), normalEndpoint(q.Endpoint)), cmp.Compare(p.OrderingKey, q.OrderingKey)); c != 0 || p.OrderingKey != "" {
			return c
		}
		return cmp.Compare(p.NotificationID, q.NotificationID)
	})
	return order
}

// subscriptionRef ties a delivery to the subscription it was published
// to, as it stood then, and to the type of the event it carries.
type subscriptionRef struct {
	id          int64
	fingerprint string
	eventType   string
	// built says the payload was made for the subscription: by
	// PublishParams.Build, or the Payload with the idempotency_key of a
	// subscription of the reporting profile. Made for its profile as it
	// is now, it may differ from the one made under another profile.
	built bool
	// given is the Payload a reporting subscription's was made from: a
	// delivery published before Publish set its key holds it as it was.
	given []byte
}

func (o *Outbox) enqueue(ctx context.Context, tx DBTX, p EnqueueParams, sub subscriptionRef) (Enqueued, error) {
	var joins []keyed
	e, err := o.insertDelivery(ctx, tx, p, sub, &joins)
	if err == nil {
		err = o.joinAll(ctx, tx, joins)
	}
	if err != nil {
		return Enqueued{}, err
	}
	return e, nil
}

// insertDelivery writes a delivery. A new one with an ordering key waits
// for its key, and so does a published one sent again (see republished):
// it is added to joins, for joinAll. So is one found still waiting for its
// key (see writeFor).
func (o *Outbox) insertDelivery(ctx context.Context, tx DBTX, p EnqueueParams, sub subscriptionRef, joins *[]keyed) (Enqueued, error) {
	if p.Profile == ack.ProfileCommand {
		return Enqueued{}, invalidArgument("Profile command is enqueued with EnqueueCommand, which validates the command")
	}
	var err error
	if p.Endpoint, err = o.s.storedAs(ctx, tx, p.Endpoint, p.NotificationID, p.OrderingKey); err != nil {
		return Enqueued{}, err
	}
	now := o.s.now()
	args, err := o.enqueueArgs(p, now)
	if err != nil {
		return Enqueued{}, err
	}
	args["subscription_id"], args["subscription_fingerprint"] = nullable(sub.id), nullable(sub.fingerprint)
	args["event_type"] = nullable(sub.eventType)
	e, join, err := o.writeFor(ctx, tx, "outbox_enqueue", args, sub)
	if err == nil && join && p.OrderingKey != "" {
		*joins = append(*joins, keyed{ID: e.ID, Endpoint: p.Endpoint, OrderingKey: sql.NullString{String: p.OrderingKey, Valid: true}})
	}
	return e, err
}

// joinAll joins the deliveries just written to their ordering keys (see
// join), in key order (inKeyOrder), each once.
func (o *Outbox) joinAll(ctx context.Context, tx DBTX, joins []keyed) error {
	if len(joins) == 0 {
		return nil
	}
	now := o.s.now()
	var last int64
	for _, j := range inKeyOrder(joins) {
		if j.ID == last {
			continue // listed twice in one EnqueueMany
		}
		last = j.ID
		if _, err := o.join(ctx, tx, now, j.ID, j.Endpoint, j.OrderingKey.String); err != nil {
			return err
		}
	}
	return nil
}

// write inserts a delivery with the named statement; if its identity is
// taken, the existing row decides (see existing).
func (o *Outbox) write(ctx context.Context, tx DBTX, name string, args map[string]any) (Enqueued, error) {
	e, _, err := o.writeFor(ctx, tx, name, args, subscriptionRef{})
	return e, err
}

// writeFor is write for a delivery published to sub (none for a plain
// enqueue), whose existing row republished resolves. It reports whether
// the delivery is to join its ordering key: queued by this call (inserted,
// or sent again), or found still waiting for its key (hold key). The
// latter is what an enqueue leaves when it fails between its insert and
// its join (a context ended) in a transaction the application goes on
// with, retrying the enqueue there: joining it again is what the first
// enqueue would have done, and a delivery that had joined is left as it
// is (join finds the key's row and its head). It runs in a span of the
// Store's Tracer, whose trace context a delivery it queues keeps.
func (o *Outbox) writeFor(ctx context.Context, tx DBTX, name string, args map[string]any, sub subscriptionRef) (e Enqueued, join bool, err error) {
	ctx, span := tracing.Start(o.s.cfg.Tracer, ctx, tracing.SpanEnqueue, courier.SpanInternal,
		slog.String(tracing.AttrNotificationID, args["notification_id"].(string)))
	defer func() {
		if err != nil {
			span.Fail(tracing.Code(err))
		} else {
			span.SetAttributes(slog.Int64(tracing.AttrDeliveryID, e.ID), slog.Bool(tracing.AttrExisted, e.Existed))
		}
		span.End()
	}()
	tc := tracing.Inject(o.s.cfg.Tracer, ctx)
	args["trace_parent"], args["trace_state"] = nullable(tc.Parent), nullable(tc.State)
	if args[argLate] == true {
		// Its deadline has come: it is written by no one now, but the
		// retry of an enqueue that wrote it in time finds it.
		r, err := getRow[outboxRow](ctx, o.s, tx, "outbox_enqueue_existing", args)
		switch {
		case errors.Is(err, courier.CodeNotFound):
			return Enqueued{}, false, errLate
		case err != nil:
			return Enqueued{}, false, err
		}
		if publishedTo(r, sub) {
			// Found as a publish again finds it (see republished): what
			// its subscription decided since is not compared.
			if err := o.samePublished(ctx, tx, r, args, sub); err != nil {
				return Enqueued{}, false, err
			}
			return Enqueued{ID: r.ID, Existed: true}, waitsForKey(r), nil
		}
		e, err := o.same(ctx, tx, r, args)
		return e, err == nil && waitsForKey(r), err
	}
	for range maxRepublishReads {
		id, err := o.insert(ctx, tx, name, args)
		switch {
		case err == nil:
			o.s.observeIn(tx, Event{Kind: EventEnqueued, N: 1, Status: courier.StatusPending})
			return Enqueued{ID: id}, true, nil
		case !errors.Is(err, errExists):
			return Enqueued{}, false, err
		case sub.id == 0:
			return o.existing(ctx, tx, args)
		}
		e, queued, err := o.republished(ctx, tx, args, sub)
		if err == nil && !queued && args["ordering_key"] != nil {
			queued, err = o.stillWaits(ctx, tx, args, e.ID)
		}
		if !errors.Is(err, errMoved) {
			return e, queued, err
		}
	}
	return Enqueued{}, false, fmt.Errorf("store: publish %s: the delivery kept changing while it was written: %w",
		args["notification_id"], errBusy)
}

// errExists is an insert that found its identity taken.
var errExists = errors.New("store: delivery exists")

// errMoved is an existing delivery that another transaction changed (a
// claim, a settle, a publish, a prune) between the publish's read of it
// and its write: the publish reads it again.
var errMoved = errors.New("store: delivery moved")

// maxRepublishReads bounds how often a publish reads a delivery it finds
// moved (errMoved). Each move is another transaction's commit, and a
// delivery makes few of them (claimed, settled, suppressed), so a publish
// that still finds it moving gives up busy rather than wait on it.
const maxRepublishReads = 8

// insert runs an outbox INSERT … ON CONFLICT DO NOTHING and returns the
// new row's id, or errExists when it inserted nothing. The payload goes
// where the engine keeps it (see writePayload).
func (o *Outbox) insert(ctx context.Context, tx DBTX, name string, args map[string]any) (id int64, err error) {
	err = o.whole(ctx, tx, func() error {
		if id, err = o.insertRow(ctx, tx, name, args); err != nil {
			return err
		}
		return o.writePayload(ctx, tx, id, args)
	})
	return id, err
}

// whole runs write, the statements that write one delivery and its
// payload in tx, as one: where a failed statement leaves the transaction
// going (SQLite), under a savepoint (outbox_write_begin), undone when one
// of them fails, so that tx holds the delivery whole or not at all. An
// engine whose failed statement aborts the transaction needs none.
func (o *Outbox) whole(ctx context.Context, tx DBTX, write func() error) error {
	if o.s.q("outbox_write_begin").text == "" {
		return write()
	}
	if _, err := o.s.exec(ctx, tx, "outbox_write_begin", nil); err != nil {
		return err
	}
	if err := write(); err != nil {
		undo := context.WithoutCancel(ctx) // a write cut short by ctx is undone all the same
		_, _ = o.s.exec(undo, tx, "outbox_write_undo", nil)
		_, _ = o.s.exec(undo, tx, "outbox_write_end", nil)
		return err
	}
	_, err := o.s.exec(ctx, tx, "outbox_write_end", nil)
	return err
}

// insertRow runs the INSERT of insert.
func (o *Outbox) insertRow(ctx context.Context, tx DBTX, name string, args map[string]any) (int64, error) {
	if o.s.dialect.LastInsertID {
		res, err := o.s.exec(ctx, tx, name, args)
		if err != nil {
			return 0, err
		}
		switch n, err := res.RowsAffected(); {
		case err != nil:
			return 0, wrapf(err, name)
		case n == 0:
			return 0, errExists
		}
		id, err := res.LastInsertId()
		return id, wrapf(err, name)
	}
	var id int64
	err := o.s.scan(ctx, tx, name, args, &id)
	if isNoRows(err) {
		return 0, errExists
	}
	return id, err
}

// writePayload writes the payload of the delivery id (args' "payload")
// where its engine keeps it apart from the delivery's row
// (outbox_payload_write: SQLite, whose UPDATEs write a row whole, payload
// and all, when they change its size, as every claim and settle does).
// It follows the statement that wrote the row, in its transaction: an
// insert, or a publish that sealed the payload again. An engine that keeps
// the payload in the row has written it there already, and does nothing.
func (o *Outbox) writePayload(ctx context.Context, tx DBTX, id int64, args map[string]any) error {
	_, err := o.s.exec(ctx, tx, "outbox_payload_write", map[string]any{"id": id, "payload": args["payload"]})
	return err
}

func (o *Outbox) enqueueArgs(p EnqueueParams, now int64) (map[string]any, error) {
	cfg := o.s.cfg
	if p.Profile == "" {
		p.Profile = ack.ProfileCourier
	}
	asked := p.MaxAttempts // 0: the Store's, whatever it is when compared
	if p.MaxAttempts == 0 {
		p.MaxAttempts = cfg.MaxAttempts
	}
	horizon := MaxHorizon.Microseconds()
	next := now
	if !p.NotBefore.IsZero() {
		next = max(now, p.NotBefore.UnixMicro())
	}
	deadline := next + cfg.RetryHorizon.Microseconds()
	if !p.Deadline.IsZero() {
		deadline = p.Deadline.UnixMicro()
	}
	switch {
	case !wire.IsToken(p.NotificationID):
		return nil, invalidArgument("NotificationID must be " + wire.TokenRule)
	case !validEndpoint(p.Endpoint):
		return nil, invalidEndpoint("Endpoint")
	case len(p.Payload) == 0 || len(p.Payload) > MaxPayloadSize:
		return nil, invalidArgument("Payload must be 1 byte to 4 MiB")
	case p.MaxAttempts < 1 || p.MaxAttempts > maxAttempts:
		return nil, invalidArgument("MaxAttempts must be within 1..1000")
	case p.Priority < math.MinInt32 || p.Priority > math.MaxInt32:
		return nil, invalidArgument("Priority must be within -2147483648..2147483647")
	case next-now > horizon:
		return nil, invalidArgument("NotBefore must be at most MaxHorizon (30 days) ahead")
	case deadline-next > horizon:
		return nil, invalidArgument("Deadline must be at most MaxHorizon (30 days) after the first attempt")
	case p.OrderingKey != "" && !wire.IsVisible(p.OrderingKey, maxOrderingKey):
		return nil, invalidArgument("OrderingKey must be 1-256 bytes of visible ASCII, without spaces")
	case p.KeyID != "" && !validText(p.KeyID, maxName):
		return nil, invalidArgument("KeyID must be at most 256 bytes of UTF-8 without NUL")
	}
	var hold any // a delivery with a key waits for it until join says it heads it
	if p.OrderingKey != "" {
		hold = string(HeldByKey)
	}
	if err := checkProfile(cfg, "Profile", p.Profile); err != nil {
		return nil, err
	}
	dedupe, err := checkPayload(p)
	if err != nil {
		return nil, err
	}
	stored, keyID, err := cfg.Encryption.seal(p.Payload, p.NotificationID, p.Endpoint, p.KeyID)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"notification_id": p.NotificationID,
		"endpoint":        p.Endpoint,
		"payload":         stored,
		"payload_key_id":  keyID,
		"payload_sha256":  cfg.Encryption.digest(p.Payload, keyID, p.NotificationID, p.Endpoint),
		argPlaintext:      p.Payload, // no statement's: existing compares it with the row
		argLate:           deadline <= next,
		"profile":         p.Profile,
		"key_id":          p.KeyID,
		"priority":        p.Priority,
		"max_attempts":    p.MaxAttempts,
		argAskedAttempts:  asked,
		"next_attempt_at": next,
		"deadline":        deadline,
		"event_type":      nil,
		"dedupe_key":      nullable(dedupe),
		"trace_parent":    nil, // set by write
		"trace_state":     nil,
		"ordering_key":    nullable(p.OrderingKey),
		"hold":            hold,
		"now":             now,
	}, nil
}

// checkPayload refuses a payload its profile's receivers cannot read, and
// returns the delivery's dedupe key. Every built-in profile's payload is
// one strict JSON document; a terminal notification must be valid and sent
// under its own notification_id, and its event_id is its dedupe key (see
// EnqueueParams). A command is checked whole by EnqueueCommand; a custom
// profile's payload is the application's.
func checkPayload(p EnqueueParams) (dedupe string, err error) {
	if _, builtin := ack.Builtin(p.Profile); !builtin || p.Profile == ack.ProfileCommand {
		return "", nil
	}
	if err := strictjson.Check(p.Payload); err != nil {
		if errors.Is(err, strictjson.ErrDuplicateKey) {
			return "", invalidArgument("Payload has an object with a duplicate key; the profile's receivers refuse it")
		}
		return "", invalidArgument(fmt.Sprintf("Payload must be one JSON document, as the receivers of profile %q read it; "+
			"a payload in another format goes under a profile of the application's own (Config.Profiles)", p.Profile))
	}
	if p.Profile != ack.ProfileTerminal {
		return "", nil
	}
	var n ack.Terminal
	if err := json.Unmarshal(p.Payload, &n); err != nil {
		return "", invalidArgument("Payload is not a terminal notification" + fieldList(err))
	}
	if err := ack.Validate(n); err != nil {
		return "", invalidArgument("Payload is not a valid terminal notification" + fieldList(err))
	}
	if n.NotificationID != p.NotificationID {
		return "", invalidArgument("NotificationID must be the terminal notification's notification_id")
	}
	return n.EventID, nil
}

// fieldList names the fields a validation error lists, content-free:
// ": field (rule), …", or "" for another error (whose text may quote the
// payload).
func fieldList(err error) string {
	var ve *ack.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) == 0 {
		return ""
	}
	names := make([]string, len(ve.Fields))
	for i, f := range ve.Fields {
		names[i] = f.Field + " (" + f.Rule + ")"
	}
	return ": " + strings.Join(names, ", ")
}

// validEndpoint and normalEndpoint are endpoint.Valid and
// endpoint.Normalize, under names that the store's many parameters called
// endpoint do not shadow. Every method given an endpoint normalizes it
// first: the store keeps an endpoint under its normalized form, so that
// each spelling of one receiver's URL (https://Example.com:443/hook,
// https://example.com/hook) is one endpoint, with one breaker, one set of
// limits, one ordering of its keys and one share of the worker.
var (
	validEndpoint  = endpoint.Valid
	normalEndpoint = endpoint.Normalize
)

// spellings returns the forms of the endpoint an operator named raw that
// the store acts on: its normalized form and, when raw differs from it
// and something is stored under raw (a database written before endpoints
// were normalized may hold its deliveries, breaker record or limits),
// raw itself.
func (s *Store) spellings(ctx context.Context, raw string) ([]string, error) {
	n := normalEndpoint(raw)
	if n == raw {
		return []string{n}, nil
	}
	var stored bool
	if err := s.scan(ctx, s.db, "endpoint_spelled", map[string]any{"endpoint": raw}, &stored); err != nil {
		return nil, err
	}
	if stored {
		return []string{n, raw}, nil
	}
	return []string{n}, nil
}

// storedAs returns the endpoint a delivery to raw, enqueued as
// notification id with ordering key key ("" for none), is stored under:
// raw's normalized form, or raw itself when a database written before
// endpoints were normalized holds, under raw, this delivery, the key's
// row, a breaker record or limits (endpoint_spelled_enqueue). So a
// delivery enqueued under the spelling it was enqueued under before
// finds its own earlier enqueue, waits for its key behind the deliveries
// before it, and keeps to the breaker and limits an operator set for that
// spelling, until those are done (see Endpoints).
func (s *Store) storedAs(ctx context.Context, tx DBTX, raw, id, key string) (string, error) {
	n := normalEndpoint(raw)
	if n == raw {
		return n, nil
	}
	var stored bool
	err := s.scan(ctx, tx, "endpoint_spelled_enqueue", map[string]any{"endpoint": raw, "notification_id": id, "ordering_key": key}, &stored)
	if err != nil {
		return "", err
	}
	if stored {
		return raw, nil
	}
	return n, nil
}

// maxName bounds the names and ids the store keeps as text: key ids,
// profiles, tenants, senders, replay nonces.
const maxName = 256

// validText reports whether s is 1 to max bytes of text every engine
// stores as it is: valid UTF-8 without NUL (PostgreSQL's text refuses
// both, where SQLite would keep them).
func validText(s string, max int) bool {
	return s != "" && len(s) <= max && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// checkProfile refuses a profile name, given as field, that
// Config.Profiles does not know, naming it. A name that is not text is
// known to none: it is refused before an application's Profiles sees it,
// and not quoted.
func checkProfile(cfg Config, field, name string) error {
	if !validText(name, maxName) {
		return invalidArgument(field + " must be 1-256 bytes of UTF-8 without NUL, a profile Config.Profiles knows")
	}
	if _, ok := cfg.Profiles(name); !ok {
		return invalidArgument(fmt.Sprintf("%s %q is not a profile Config.Profiles knows (package ack's Profile* names, by default)", field, name))
	}
	return nil
}

// existing resolves an enqueue that inserted nothing: the same delivery is
// a no-op, anything else a collision. Nothing under the delivery's
// identity means the insert met its dedupe key: another terminal
// notification for the same event is enqueued for the endpoint. It
// reports whether the delivery found still waits for its ordering key
// (see writeFor).
func (o *Outbox) existing(ctx context.Context, tx DBTX, args map[string]any) (Enqueued, bool, error) {
	r, err := getRow[outboxRow](ctx, o.s, tx, "outbox_enqueue_existing", args)
	if errors.Is(err, courier.CodeNotFound) && args["dedupe_key"] != nil {
		return Enqueued{}, false, fmt.Errorf("store: the endpoint has another terminal notification for this event: %w", courier.CodeIdempotencyCollision)
	}
	if err != nil {
		return Enqueued{}, false, err
	}
	e, err := o.same(ctx, tx, r, args)
	return e, err == nil && waitsForKey(r), err
}

// stillWaits reads again whether the published delivery id, found by
// republished, waits for its ordering key; errMoved if it is gone.
func (o *Outbox) stillWaits(ctx context.Context, tx DBTX, args map[string]any, id int64) (bool, error) {
	r, err := getRow[outboxRow](ctx, o.s, tx, "outbox_enqueue_existing", args)
	switch {
	case errors.Is(err, courier.CodeNotFound):
		return false, errMoved
	case err != nil:
		return false, err
	}
	return r.ID == id && waitsForKey(r), nil
}

// waitsForKey reports whether a stored delivery waits for its ordering
// key: one whose enqueue may not have joined it (see writeFor).
func waitsForKey(r outboxRow) bool {
	return r.OrderingKey.Valid && r.Hold.String == string(HeldByKey)
}

// same reports whether the stored row r is the delivery args describe:
// Existed if it is, a collision if not.
func (o *Outbox) same(ctx context.Context, tx DBTX, r outboxRow, args map[string]any) (Enqueued, error) {
	if err := o.samePayload(ctx, tx, r, args); err != nil {
		return Enqueued{}, err
	}
	var field string
	switch {
	case r.Profile != args["profile"]:
		field = "Profile"
	case r.KeyID != args["key_id"]:
		field = "KeyID"
	case !sameBudget(r, args, o.s.cfg.MaxAttempts):
		field = "MaxAttempts"
	case r.Priority != args["priority"]:
		field = "Priority"
	case nullable(r.OrderingKey.String) != args["ordering_key"]:
		field = "OrderingKey"
	default:
		return Enqueued{ID: r.ID, Existed: true}, nil
	}
	return Enqueued{}, collisionWith(field)
}

// collisionWith is the collision of an enqueue or publish made again with
// another value of field (an EnqueueParams or PublishParams field) than
// the stored delivery's. It names the field, so that an application that
// changed only its Priority, say, is told which, and that the stored
// delivery stands.
func collisionWith(field string) error {
	return &coded.Error{Code: courier.CodeIdempotencyCollision,
		Msg: "store: same identity, different content: the delivery exists with another " + field + ", and stands unchanged"}
}

// sameBudget reports whether the stored row r was enqueued with the
// attempt budget the enqueue args asks for. Each is the one it named, or
// 0 for the Store's default (def, Config.MaxAttempts): two defaults are
// the same whatever Config.MaxAttempts was then or is now (an
// application's enqueue made again across a change of it is the same),
// and a default is the same as the budget it stands for now. Not the
// row's max_attempts, which Redrive (and a publish that sends a
// suppressed delivery again, and an attempt cut short as its worker
// stopped) raises past it. A row enqueued before the outbox kept the
// budget asked for (migration 12 on SQLite, 13 on PostgreSQL) has none:
// its max_attempts is compared with the budget in effect, as before, and
// the first of those to raise it keeps that before raising it. So only a
// row redriven before that migration is compared with the budget a
// redrive gave it.
func sameBudget(r outboxRow, args map[string]any, def int) bool {
	if !r.EnqueuedMaxAttempts.Valid {
		return r.MaxAttempts == args["max_attempts"]
	}
	stored, asked := int(r.EnqueuedMaxAttempts.Int64), args[argAskedAttempts].(int)
	switch {
	case stored == asked:
		return true
	case asked == 0:
		return stored == def
	case stored == 0:
		return asked == def
	}
	return false
}

// samePayload reports, as nil or a collision, whether the stored row r
// holds the payload args has. A sealed row whose digest does not match
// is a collision only if its payload opens under the key Keys holds for
// its id: if it does not, that key is not the one it was sealed with (or
// the row was altered), the digest tells nothing, and the error names the
// key, as for a key that is gone.
func (o *Outbox) samePayload(ctx context.Context, tx DBTX, r outboxRow, args map[string]any) error {
	// The row's digest is keyed under the key that sealed it, which may no
	// longer be Current: the payload is compared under that key.
	same, err := o.s.cfg.Encryption.matches(args[argPlaintext].([]byte), r.PayloadSHA256, r.PayloadKeyID,
		args["notification_id"].(string), args["endpoint"].(string))
	switch {
	case err != nil:
		return &coded.Error{Code: courier.CodeIdempotencyCollision, Msg: "store: the delivery exists, sealed under payload key " + r.PayloadKeyID + ", which Encryption.Keys no longer holds: its payload cannot be compared"}
	case same:
		return nil
	case r.PayloadKeyID == "":
		return collisionWith("Payload")
	}
	stored, err := getRow[outboxRow](ctx, o.s, tx, "outbox_get", map[string]any{"id": r.ID})
	switch {
	case errors.Is(err, courier.CodeNotFound): // pruned since: it collided as it was read
		return collisionWith("Payload")
	case err != nil:
		return err
	}
	if _, err := o.s.cfg.Encryption.open(stored.Payload, stored.PayloadKeyID, stored.NotificationID, stored.Endpoint, stored.KeyID); err != nil {
		return &coded.Error{Code: courier.CodeIdempotencyCollision, Msg: "store: the delivery exists, sealed under payload key " + r.PayloadKeyID + ", and does not open under the key Encryption.Keys holds for that id (other bytes than it was sealed with, or the row was altered): its payload cannot be compared"}
	}
	return collisionWith("Payload")
}

// republished resolves a publish whose delivery (the event's to sub)
// exists, as Publish documents: the stored row is compared with what the
// caller chose (the event's payload, unless Build made it for another
// profile than the row's; priority; ordering key), never with what the
// subscription decides, which may have changed since (key, profile; the
// Store's budget). Then, by the row's state:
//
//   - suppressed subscription_changed (the subscription changed, was
//     paused or did not want the event when it was claimed): the
//     subscriber never got it, so it is sent again under the subscription
//     as it is now (outbox_publish_revive); queued reports it.
//   - unfinished (pending, retrying, leased) under another fingerprint:
//     its claim would suppress it, so it is brought up to date in place
//     (outbox_publish_refresh); an attempt in flight is not recalled.
//   - anything else: found, Existed.
//
// Neither is written when the subscription no longer has the fingerprint
// sub was read with: the delivery is found as it is, Existed, and left
// to a publish that reads the subscription as it is now.
//
// A delivery written under this identity by another than the publish to
// sub (Enqueue) is compared whole, as Enqueue compares. errMoved says the
// row changed under it: the caller reads it again. A delivery with an
// ordering key is written only once its key's row is held (see
// ordering_key_lock_of).
func (o *Outbox) republished(ctx context.Context, tx DBTX, args map[string]any, sub subscriptionRef) (e Enqueued, queued bool, err error) {
	r, err := getRow[outboxRow](ctx, o.s, tx, "outbox_enqueue_existing", args)
	switch {
	case errors.Is(err, courier.CodeNotFound):
		return Enqueued{}, false, errMoved // pruned since the insert met it
	case err != nil:
		return Enqueued{}, false, err
	case !publishedTo(r, sub):
		e, err := o.same(ctx, tx, r, args)
		return e, false, err
	}
	if err := o.samePublished(ctx, tx, r, args, sub); err != nil {
		return Enqueued{}, false, err
	}
	changed := r.SubscriptionFingerprint.String != sub.fingerprint
	args["id"] = r.ID
	revive := r.Status == courier.StatusSuppressed && r.LastErrorCode.String == string(courier.CodeSubscriptionChanged) && r.Attempts < maxAttempts
	if revive || changed && unfinished(r.Status) {
		// The subscription was read before this: an Update committed
		// since (on PostgreSQL, while this transaction ran) makes what
		// was read stale, and the row may be a later publish's, under
		// the subscription as it is now. Written back under what was
		// read, its claim would suppress it.
		switch current, err := o.s.Subscriptions.fingerprint(ctx, tx, sub.id); {
		case err != nil:
			return Enqueued{}, false, err
		case current != sub.fingerprint:
			return Enqueued{ID: r.ID, Existed: true}, false, nil
		}
	}
	if (revive || changed && unfinished(r.Status)) && r.OrderingKey.Valid {
		// The key's row first, as Cancel takes it: a worker's settle or
		// claim that holds the key promotes (locks) the delivery waiting
		// behind its head, and one that finds the key held leaves it for a
		// later claim (advanceOrLeave); with the delivery's row held
		// first, the worker would wait for this transaction, or the two
		// for each other.
		var head []int64
		if err := o.s.selectRows(ctx, tx, "ordering_key_lock_of", map[string]any{"id": r.ID}, &head); err != nil {
			return Enqueued{}, false, err
		}
	}
	switch {
	case revive:
		var id int64
		err := o.whole(ctx, tx, func() error {
			switch err := o.s.scan(ctx, tx, "outbox_publish_revive", args, &id); {
			case isNoRows(err):
				return errMoved
			case err != nil:
				return err
			}
			return o.writePayload(ctx, tx, id, args)
		})
		if err != nil {
			return Enqueued{}, false, err
		}
		o.s.observeIn(tx, Event{Kind: EventEnqueued, N: 1, Status: courier.StatusPending})
		return Enqueued{ID: id}, true, nil
	case changed && unfinished(r.Status):
		err := o.whole(ctx, tx, func() error {
			res, err := o.s.exec(ctx, tx, "outbox_publish_refresh", args)
			if err != nil {
				return err
			}
			switch n, err := res.RowsAffected(); {
			case err != nil:
				return wrapf(err, "outbox_publish_refresh")
			case n == 0:
				return errMoved
			}
			return o.writePayload(ctx, tx, r.ID, args)
		})
		if err != nil {
			return Enqueued{}, false, err
		}
		return Enqueued{ID: r.ID}, false, nil
	}
	return Enqueued{ID: r.ID, Existed: true}, false, nil
}

// publishedTo reports whether the stored row r is a delivery published to
// sub, rather than written by another (Enqueue) or for no subscription.
func publishedTo(r outboxRow, sub subscriptionRef) bool {
	return sub.id != 0 && r.SubscriptionID.Valid && r.SubscriptionID.Int64 == sub.id
}

// samePublished reports, as nil or a collision, whether the stored row r,
// published to sub, holds what the publish args describes chose: its
// event type (one published before the outbox recorded event types has
// none to compare), its priority, its ordering key and its payload, unless
// the payload was made for another profile than the row's (see
// subscriptionRef.built). What the
// subscription decides (key, profile) and the Store's budget are not
// compared: they may have changed since, and a delivery sent again has a
// budget of its own.
func (o *Outbox) samePublished(ctx context.Context, tx DBTX, r outboxRow, args map[string]any, sub subscriptionRef) error {
	switch {
	case r.EventType.Valid && r.EventType.String != sub.eventType:
		return collisionWith("EventType")
	case r.Priority != args["priority"]:
		return collisionWith("Priority")
	case nullable(r.OrderingKey.String) != args["ordering_key"]:
		return collisionWith("OrderingKey")
	}
	// A payload made for the row's profile (a reporting one's has its
	// key) is another under another profile.
	if !sub.built && r.Profile != ack.ProfileReporting || r.Profile == args["profile"] {
		err := o.samePayload(ctx, tx, r, args)
		if errors.Is(err, courier.CodeIdempotencyCollision) && sub.given != nil { // published before its key was set?
			given := maps.Clone(args)
			given[argPlaintext] = sub.given
			err = o.samePayload(ctx, tx, r, given)
		}
		return err
	}
	return nil
}

// unfinished reports whether a delivery of status st may still be sent.
func unfinished(st courier.Status) bool {
	return st == courier.StatusPending || st == courier.StatusRetryWait || st == courier.StatusLeased
}

// argAskedAttempts is the entry of an enqueue's arguments that holds the
// attempt budget it named, 0 for the Store's default (enqueued_max_attempts;
// see sameBudget).
const argAskedAttempts = "enqueued_max_attempts"

// argLate is the entry of an enqueue's arguments that says its deadline
// has come, at or before its first attempt would be due: no such delivery
// may be written (errLate), but one written before, when it was still
// ahead, is found as a retry of the enqueue finds any (see writeFor). No
// statement binds it.
const argLate = "late"

// errLate is a delivery that would be written with its deadline come.
var errLate = &coded.Error{Code: courier.CodeInvalidArgument, Msg: "store: Deadline must be after the first attempt: no attempt starts at or after it"}

// isLate reports whether err is errLate itself, not another error of its
// code.
func isLate(err error) bool { return errors.Is(err, errLate) }

// argPlaintext is the entry of an enqueue's arguments that holds the
// payload as the caller gave it, for existing; no statement binds it.
const argPlaintext = "plaintext"
