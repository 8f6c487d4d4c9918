package handler

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/jsonbody"
	"github.com/courier-go/courier/internal/protocol"
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
)

// ReportingConfig configures a Reporting receiver. It has no
// AllowUnknownFields: an AdCP envelope may always carry members of its
// own, so unknown members are accepted (case variants of the envelope's
// own members are not).
type ReportingConfig struct {
	// Store, Verifier, Body, Logger and Hook are as in ReceiverConfig:
	// Store (it holds the Inbox) and Verifier are required.
	Store    *store.Store
	Verifier signature.Verifier
	Body     middleware.BodyLimits
	Logger   *slog.Logger
	Hook     func(Event)
	// RetryHorizon is how long the senders may retry one delivery. Dedupe
	// records must outlive it; see Reporting.Retention. Defaults to zero
	// (unknown): the retention is then 24 hours, AdCP's minimum.
	RetryHorizon time.Duration
	// StaleAfter is how long a request may hold a delivery's claim before
	// a retry takes it over, as from a receiver that died while
	// processing. Keep it above the application's longest processing
	// time: a request whose claim was taken over rolls back. Defaults to
	// 5 minutes.
	StaleAfter time.Duration
}

// Reporting is the receiver of AdCP webhooks (ack.Reporting envelopes). It
// refuses a request in the same order as every handler (405, 415, 413,
// 401, 400) and then dedupes by (verified sender, idempotency_key), judging
// "same body" on the RFC 8785 (JCS) form, so a sender that re-serializes
// the same JSON is not taken for a collision:
//
//	200 (empty)               processed now, or a duplicate of a processed delivery (never 409)
//	409 idempotency_collision the key was received with another body
//	503 in_progress           another request holds the key (Retry-After)
//	422 <code>                the application refused it for good (see Reject)
//	500 handler_failed        the application's function failed; the sender retries
//	503 internal_error        the store could not answer (Retry-After)
//
// Receipt is two-phase: the claim is committed on its own, so that a
// concurrent duplicate sees it in progress at once; then the function runs
// and the claim is completed in one transaction. A failed
// or refused delivery gives the claim back (trying again for a few
// seconds should the database refuse that too), so nothing stays
// written.
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
// delivery.
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
	case cfg.StaleAfter == 0:
		cfg.StaleAfter = defaultStaleAfter
	}
	if fn == nil {
		return nil, configError("NewReporting: the Func is required")
	}
	rp := &Reporting{cfg: cfg, fn: fn, front: f}
	rp.h = f.handler(rp.receive)
	return rp, nil
}

// Retention is how long dedupe records must be kept: the senders' retry
// horizon, and at least 24 hours (AdCP's minimum). Prune with it:
//
//	store.Inbox.Prune(ctx, store.PruneParams{OlderThan: rp.Retention()})
func (rp *Reporting) Retention() time.Duration {
	return max(minReportingRetention, rp.cfg.RetryHorizon)
}

// ServeHTTP implements http.Handler.
func (rp *Reporting) ServeHTTP(w http.ResponseWriter, r *http.Request) { rp.h.ServeHTTP(w, r) }

// receive runs behind signature verification.
func (rp *Reporting) receive(w http.ResponseWriter, r *http.Request, body []byte, principal signature.Principal) {
	ctx := r.Context()
	canonical, err := ack.JCS(body)
	if err != nil {
		jsonbody.Malformed(w, err)
		return
	}
	var n ack.Reporting
	if !jsonbody.DecodeChecked(w, body, &n, true) {
		return
	}
	key := protocol.InboxKey{Sender: principal.Sender, Key: n.IdempotencyKey, PayloadSHA256: ack.Digest(canonical)}
	stored, duplicate, err := rp.process(ctx, key, n)
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
// profile).
func (rp *Reporting) process(ctx context.Context, key protocol.InboxKey, n ack.Reporting) (stored []byte, duplicate bool, err error) {
	inbox := protocol.InboxFor(rp.cfg.Store)
	receipt, claim, err := inbox.Claim(ctx, key, rp.cfg.StaleAfter)
	if err == nil && receipt.InProgress && rp.unreleased.retry(ctx, inbox, key) {
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
	if err := apply(rp.front.tracer, ctx, func(ctx context.Context) error { return rp.fn(writerctx.WithHeld(ctx), tx, n) }); err != nil {
		return nil, false, fromApp(err)
	}
	switch err := inbox.CompleteClaim(ctx, tx, claim, nil); {
	case endedByApp(ctx, err):
		return nil, false, fromApp(errTxEnded)
	case errors.Is(err, courier.CodeLeaseLost):
		return nil, false, errInProgress // taken over: the other request answers for it
	case err != nil:
		return nil, false, fromStore(err)
	}
	if err := commit(ctx, tx); err != nil {
		return nil, false, err
	}
	completed = true
	return nil, false, nil
}
