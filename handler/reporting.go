package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/jsonbody"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// Defaults and bounds of ReportingConfig.
const (
	// defaultStaleAfter is how long a claim may stay processing before
	// another request takes it over.
	defaultStaleAfter = 5 * time.Minute
	// minReportingRetention is the least time a reporting receiver keeps
	// its dedupe records: AdCP's minimum.
	minReportingRetention = 24 * time.Hour
	// defaultRetryHorizon is ReportingConfig.RetryHorizon's default: a
	// courier sender's (store.Config.RetryHorizon's default).
	defaultRetryHorizon = wire.RetryHorizon
)

// ReportingConfig configures a Reporting receiver. It has no
// AllowUnknownFields: an AdCP envelope may always carry members of its
// own, so unknown members are accepted (case variants of the envelope's
// own members are not). Nor has it a switch for re-emissions: a terminal
// delivery's notification_id is always deduped too (see Reporting), as
// AdCP requires.
type ReportingConfig struct {
	// Store, Verifier, Body, Logger and Hook are as in ReceiverConfig:
	// Store (it holds the Inbox) and Verifier are required.
	Store    *store.Store
	Verifier signature.Verifier
	Body     middleware.BodyLimits
	Logger   *slog.Logger
	Hook     func(Event)
	// RetryHorizon is how long the senders may retry one delivery. Dedupe
	// records must outlive it, or a redelivery after its record is pruned
	// runs the function again; see Reporting.Retention. Defaults to 72
	// hours, a courier sender's; set it to the senders' own when they
	// promise one (AdCP asks at least 24 hours of them).
	RetryHorizon time.Duration
	// StaleAfter is how long a request may hold a delivery's claim before
	// a retry takes it over, as from a receiver that died while
	// processing. Keep it above the application's longest processing
	// time: a request whose claim was taken over rolls back. It must be
	// shorter than RetryHorizon, so that the claim of a receiver that died
	// goes stale while the sender still retries (NewReporting refuses it
	// otherwise). Defaults to 5 minutes.
	StaleAfter time.Duration
}

// Reporting is the receiver of AdCP webhooks (ack.Reporting envelopes). It
// refuses a request in the same order as every handler (405, 415, 413,
// 401, 400) and then dedupes by (verified sender, idempotency_key), judging
// "same body" on the RFC 8785 (JCS) form, so a sender that re-serializes
// the same JSON is not taken for a collision:
//
//	200 (empty)               processed now, a duplicate of a processed delivery (never 409), or a terminal re-emission
//	409 idempotency_collision the key was received with another body
//	503 in_progress           another request holds the key (Retry-After)
//	422 <code>                the application refused it for good (see Reject)
//	500 handler_failed        the application's function failed; the sender retries
//	503 internal_error        the store could not answer, under the function too (Retry-After)
//
// Receipt is two-phase: the claim is committed on its own, so that a
// concurrent duplicate sees it in progress at once; then the function runs
// and the claim is completed in one transaction. A failed
// or refused delivery gives the claim back (trying again for a few
// seconds should the database refuse that too), so nothing stays
// written.
//
// A terminal re-emission is not processed either. AdCP
// (core/mcp-webhook-payload.json) makes notification_id, where a sender
// sets it, the identity of one logical event across deliveries: for a task
// whose status is terminal (completed, failed, canceled, rejected: A2A's
// terminal TaskStates), "different delivery keys carrying the same value
// are re-emissions and MUST NOT republish terminal effects". So a task
// webhook with a terminal status and a notification_id also records, in the
// function's transaction and before the function runs, (verified sender,
// task_id, notification_id) in the Inbox. If an earlier delivery of that
// sender, under another idempotency_key, committed the same task_id and
// notification_id, the function is not run: the delivery's own key is
// completed and it is answered 200, marked a duplicate for the Hook. A
// re-emission that arrives while the first is still being processed waits
// for the first's transaction (on PostgreSQL, the record's row lock; on
// SQLite, the one writer) and is then a duplicate, or, if the first rolled
// back, is processed itself. Re-emissions of other statuses, deliveries
// without a notification_id, notifications of other families than a
// task's (a result whose notification_type names one: a delivery report,
// final too, whose notification_id AdCP leaves out; an impairment, whose
// notification_id is the same on its opening and closing fires, whatever
// the envelope's status) and the same notification_id from
// another sender or of another task are processed as any delivery. The record is pruned with the
// idempotency records (Retention). A seller that fans one terminal status
// out to two endpoints of yours sends it under two keys: to Reporting
// receivers that share a Store's Inbox and a verifier's Sender, the second
// is such a re-emission, and only the first endpoint's function runs. Give
// each endpoint whose function must run a verifier of its own, its Sender
// named for the endpoint, as the package doc says of a sender that
// delivers one notification to two of your endpoints.
//
// On SQLite the function's transaction holds the database's one write lock
// while it runs, so a duplicate in that time waits for it, like every other
// writer (the replay cache too), and is then answered 200. One that takes
// the writer between the claim's commit and the function's transaction
// finds the key in progress and is answered 503, as on PostgreSQL: the
// sender retries it, and the function still runs once.
type Reporting struct {
	cfg        ReportingConfig
	fn         Func[ack.Reporting]
	front      front
	h          http.Handler
	unreleased unreleased
}

// NewReporting returns a Reporting receiver that runs fn once per
// delivery, and once per terminal notification_id (see Reporting).
func NewReporting(cfg ReportingConfig, fn Func[ack.Reporting]) (*Reporting, error) {
	f, err := newFront("ReportingConfig", cfg.Store, cfg.Verifier, cfg.Body, cfg.Logger, cfg.Hook)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.RetryHorizon < 0:
		return nil, configError("ReportingConfig.RetryHorizon must not be negative")
	case cfg.StaleAfter < 0:
		return nil, configError("ReportingConfig.StaleAfter must not be negative")
	}
	if cfg.RetryHorizon == 0 {
		cfg.RetryHorizon = defaultRetryHorizon
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = defaultStaleAfter
	}
	if cfg.StaleAfter >= cfg.RetryHorizon {
		// A claim left by a receiver that died while processing would
		// answer every retry 503 in_progress until the sender gave up.
		return nil, configError(fmt.Sprintf("ReportingConfig.StaleAfter (%v) must be shorter than RetryHorizon (%v), or a claim left by a receiver that died outlasts the sender's retries; StaleAfter defaults to 5 minutes",
			cfg.StaleAfter, cfg.RetryHorizon))
	}
	if fn == nil {
		return nil, configError("NewReporting: the Func is required")
	}
	rp := &Reporting{cfg: cfg, fn: fn, front: f}
	rp.h = f.handler(rp.receive)
	return rp, nil
}

// Retention is how long dedupe records must be kept: the senders' retry
// horizon (72 hours unless ReportingConfig says otherwise) and an hour
// more, and at least 24 hours (AdCP's minimum). The hour is for the
// last attempt: a sender may start one just before its horizon ends, and
// it arrives as much later as the sender waits for an answer (a courier
// worker waits at most an hour). Prune with it:
//
//	store.Inbox.Prune(ctx, store.PruneParams{OlderThan: rp.Retention()})
//
// Prune deletes the old records of every receiver and sender sharing the
// Store: where several receivers do, prune with the longest Retention any
// of them needs.
//
// A record pruned is forgotten: a delivery received again after that
// runs the function again. That happens to a delivery its sender sends
// again past the horizon, as a courier sender does when an operator
// redrives a failed delivery (store.Outbox.Redrive: every attempt carries
// the same idempotency_key). It happens too to a terminal re-emission
// (see Reporting) that arrives more than Retention after the first
// delivery of its notification_id was processed: that delivery's record
// of the notification_id is pruned with the others.
func (rp *Reporting) Retention() time.Duration {
	if rp.cfg.RetryHorizon > math.MaxInt64-wire.MaxAttemptTimeout { // the sum would overflow
		return math.MaxInt64
	}
	return max(minReportingRetention, rp.cfg.RetryHorizon+wire.MaxAttemptTimeout)
}

// ServeHTTP implements http.Handler.
func (rp *Reporting) ServeHTTP(w http.ResponseWriter, r *http.Request) { rp.h.ServeHTTP(w, r) }

// receive runs behind signature verification.
func (rp *Reporting) receive(w http.ResponseWriter, r *http.Request, body []byte, principal signature.Principal) {
	ctx := r.Context()
	canonical, err := canonical.JCS(body)
	if err != nil {
		jsonbody.NotCanonical(w, body, err)
		return
	}
	var n ack.Reporting
	if !jsonbody.DecodeChecked(w, body, &n, true) {
		return
	}
	key := protocol.InboxKey{Sender: principal.Sender, Key: n.IdempotencyKey, PayloadSHA256: ack.Digest(canonical)}
	stored, duplicate, err := rp.process(ctx, key, reemissionKey(principal.Sender, n), n)
	if err != nil {
		answer(w, err)
		return
	}
	if duplicate {
		markDuplicate(w)
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if len(stored) > 0 {
		h.Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(stored)
}

// process claims the key and, if this request holds the claim, runs the
// application's function and completes the claim in one transaction. It
// returns the stored answer of a completed duplicate (empty for this
// profile). With a re-emission key (reemissionKey), the transaction first
// records it: if an earlier delivery recorded it, the function is not run
// and the claim is completed as a duplicate's.
func (rp *Reporting) process(ctx context.Context, key protocol.InboxKey, reemission *protocol.InboxKey, n ack.Reporting) (stored []byte, duplicate bool, err error) {
	inbox := protocol.InboxFor(rp.cfg.Store)
	receipt, claim, err := inbox.Claim(ctx, key, rp.cfg.StaleAfter)
	if err == nil && receipt.InProgress && rp.unreleased.releaseRemembered(ctx, inbox, key) {
		receipt, claim, err = inbox.Claim(ctx, key, rp.cfg.StaleAfter)
	}
	if stored, answered, err := answeredBy(receipt, err); answered {
		return stored, err == nil, err
	}
	completed := false
	defer func() {
		if completed {
			return
		}
		// Give the claim back, also when the client went away, fn
		// panicked or the database went away for a moment, so the
		// sender's retry processes the delivery. The claim is fenced:
		// if another request took it over, this is a no-op. Runs after
		// the rollback below, which frees SQLite's write lock.
		rp.unreleased.giveBack(ctx, inbox, claim, rp.front.logger)
	}()
	tx, err := rp.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, false, fromStore(err)
	}
	defer tx.Rollback() // after Commit, a no-op
	reemitted := false
	if reemission != nil {
		// Recorded completed, in tx: it commits with the function's
		// effects, or goes with them. A concurrent re-emission's insert
		// waits for this transaction and then finds the record (or, after
		// a rollback, records it itself).
		receipt, err := inbox.RecordCompleted(ctx, tx, *reemission, nil)
		switch {
		case err != nil:
			return nil, false, fromInbox(err)
		case receipt.InProgress: // such a key is only ever recorded completed; a record in progress is none of ours
			return nil, false, errInProgress
		}
		reemitted = !receipt.Fresh
	}
	if !reemitted {
		if err := runFunc(rp.front.tracer, ctx, nil, func(ctx context.Context) error { return rp.fn(writerctx.WithHeld(ctx), tx, n) }); err != nil {
			return nil, false, fromFunc(ctx, inbox, err, tx.Rollback())
		}
	}
	switch err := inbox.CompleteClaim(ctx, tx, claim, nil); {
	case endedByApp(ctx, err):
		return nil, false, fromApp(errTxEnded)
	case errors.Is(err, courier.CodeLeaseLost):
		return nil, false, errInProgress // taken over: the other request answers for it
	case err != nil:
		return nil, false, fromInbox(err)
	}
	if err := commit(ctx, tx); err != nil {
		return nil, false, err
	}
	completed = true
	return nil, reemitted, nil
}

// terminalTaskStatuses are the task statuses (enums/task-status.json)
// after which a task changes no more: A2A's terminal TaskStates. The others
// (submitted, working, input-required, auth-required, unknown) may be
// reported again as the task goes on.
var terminalTaskStatuses = []string{"completed", "failed", "canceled", "rejected"}

// reemissionPrefix begins the Inbox key of a terminal notification_id
// (reemissionKey).
const reemissionPrefix = "courier.reporting.reemission:"

// reemissionDigest is the payload digest every re-emission record stores,
// so that a re-emission is a duplicate of the first, never a collision.
// It is the SHA-256 of a string that is not JSON, so no record of a
// received body can store it: an idempotency_key's stores the digest of
// its body's JCS form, a terminal notification's of its canonical JSON, a
// command's or another Receiver's of its bytes, all JSON.
var reemissionDigest = ack.Digest([]byte(reemissionPrefix + "v1"))

// reemissionKey returns the Inbox key that makes a terminal
// notification_id one effect per verified sender, or nil when n has none
// (no notification_id, a status that is not terminal, or a notification
// of another family than a task's: see isNotification).
//
// The key binds the task_id with the notification_id: AdCP makes the
// sender and the bound task_id a terminal event's authoritative identity,
// so the same notification_id under another task (a sender reusing a
// constant, say) is another task's terminal effect, not a re-emission.
// It is reemissionPrefix followed by the hex SHA-256 of the task_id's
// length, the task_id and the notification_id: a token (wire.IsToken) of
// 93 characters whatever the ids. It lives in the Inbox beside the sender's other keys and cannot be
// taken for one of them. An idempotency_key is the sender's random value
// (AdCP: UUID v4 recommended; NewIdempotencyKey: "whk_" and base32), a
// Source's key is operation:request_id and a terminal notification's its
// event_id, none of which is this prefix and 64 hex digits unless a
// sender deliberately builds one from the hash of its own task_id and
// notification_id (a Source's operation would have to be
// "courier.reporting.reemission"). Even then nothing is skipped in silence: the records'
// digests differ (reemissionDigest is no JSON body's), so the Inbox
// answers an idempotency collision (409) to that sender alone, keys being
// scoped by the verified sender.
func reemissionKey(sender string, n ack.Reporting) *protocol.InboxKey {
	if n.NotificationID == "" || !slices.Contains(terminalTaskStatuses, n.Status) || isNotification(n.Result) {
		return nil
	}
	id := strconv.Itoa(len(n.TaskID)) + ":" + n.TaskID + n.NotificationID
	return &protocol.InboxKey{Sender: sender, Key: reemissionPrefix + ack.Digest([]byte(id)), PayloadSHA256: reemissionDigest}
}

// isNotification reports whether result is a notification of one of
// AdCP's families (a delivery report, an impairment, a creative's or an
// account's change, …) rather than a task's result: an object whose
// notification_type member, its name spelled in any case as
// ack.Reporting.IsDeliveryReport reads it, names a family, a string that
// is not empty. A member that names none (null, "", a number, an object)
// is a task result's own, and the webhook a task's: taken for another
// family's, its terminal re-emissions would run the function again. A
// family's notification_id is the family's own identity, not one terminal
// effect, and the envelope's status says nothing of it: an impairment's is
// its impairment_id, the same on the fires while it is open and on the
// closing fire that says it is resolved. So only a task webhook's terminal
// notification_id is deduped.
func isNotification(result json.RawMessage) bool { return len(wire.NotificationTypes(result)) > 0 }
