package handler

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/commandresponse"
	"github.com/courier-go/courier/internal/jsonbody"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// ErrAlreadyApplied is returned by a Source's Func when the command's
// effect was already present: the Source then commits and answers with
// status already_applied instead of applied. A function may find the
// effect present by a write that fails (an insert of a row that exists):
// on PostgreSQL that failed statement leaves the transaction unable to
// commit, and the Source then records the command, with its response, in
// a transaction of its own, without the function's writes.
//
// A redelivery of a command the Source recorded never reaches the
// function, and is not answered already_applied: it gets the stored
// response byte for byte, applied (or already_applied) as it was first
// answered. ErrAlreadyApplied is for a command the Source has no record
// of (another request_id, or one whose record was pruned) whose effect
// the application finds in place.
var ErrAlreadyApplied = errors.New("handler: command already applied")

// SourceConfig configures a Source. It has no AllowUnknownFields: a
// command's members are fixed by the contract, and anything else is
// refused.
type SourceConfig struct {
	// Store, Verifier, Body, Logger and Hook are as in ReceiverConfig:
	// Store (it holds the Inbox) and Verifier are required. The outbox
	// enqueues commands of at most 1 MiB, Body.MaxBytes' default (see
	// store.Outbox.EnqueueCommand): a Source that reads less refuses the
	// larger ones 413, and their deliveries fail.
	Store    *store.Store
	Verifier signature.Verifier
	Body     middleware.BodyLimits
	Logger   *slog.Logger
	Hook     func(Event)
	// CapabilitiesSHA256 is the capabilities digest of the contract this
	// source serves (64 lowercase hex); a new command built for another is
	// refused 409 contract_changed, while a redelivery of a command applied
	// before still gets its stored response. Required: no default.
	CapabilitiesSHA256 string
}

// Source is the source side of the source-delivery profile: an
// http.Handler that applies each ack.Command exactly once and answers with
// the ack.CommandResponse that binds the command's identity, the digest of
// the exact body, the capabilities digest, the attempt it saw (the
// Courier-Attempt header) and the source's budget. The response is stored
// in the Inbox with the command and replayed byte for byte to every
// redelivery, even once the source serves another contract. Beyond the
// answers every handler gives, it refuses:
//
//	400 validation_failed           Courier-Attempt missing, sent twice, or not 1..1000
//	409 contract_changed            a new command built for another capabilities digest
//	422 source_attempts_exhausted   a new command at an attempt beyond source_max_attempts
//
// Courier-Attempt is not signed, so the budget it is judged by is
// advisory. Whoever holds a copy of a signed command can send it again
// with another attempt, for as long as the Verifier accepts its signature
// (the Standard Webhooks and HMAC windows, a Bearer token's lifetime; an
// RFC 9421 signature is accepted once). A copy with the attempt raised is
// refused and records nothing, so the sender's own request is applied
// after it; once a command is applied, every copy gets its stored
// response. A copy with the attempt lowered of a request refused for the
// budget (a command redriven past it) is applied:
// source_attempts_exhausted says the command was not applied by that
// request, not that no copy of it will be.
type Source struct {
	cfg   SourceConfig
	fn    Func[ack.Command]
	front front
	h     http.Handler
	// unreleased are the records of commands whose functions committed
	// them and that could not be given back (see process): a redelivery
	// gives its key's back first.
	unreleased unreleased
}

// NewSource returns a Source serving the contract cfg.CapabilitiesSHA256
// names, running fn once per command.
func NewSource(cfg SourceConfig, fn Func[ack.Command]) (*Source, error) {
	f, err := newFront("SourceConfig", cfg.Store, cfg.Verifier, cfg.Body, cfg.Logger, cfg.Hook)
	if err != nil {
		return nil, err
	}
	if !wire.IsDigest(cfg.CapabilitiesSHA256) {
		return nil, configError("SourceConfig.CapabilitiesSHA256 must be 64 lowercase hex")
	}
	if fn == nil {
		return nil, configError("NewSource: the Func is required")
	}
	s := &Source{cfg: cfg, fn: fn, front: f}
	s.h = f.handler(s.receive)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Source) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

func (s *Source) receive(w http.ResponseWriter, r *http.Request, body []byte, principal signature.Principal) {
	ctx := r.Context()
	// One attempt line: with two, whether the budget passes would depend
	// on which of them were read.
	if len(r.Header.Values(ack.AttemptHeader)) > 1 {
		jsonbody.Invalid(w, &ack.ValidationError{Fields: []ack.FieldError{{Field: ack.AttemptHeader, Rule: "single"}}})
		return
	}
	attempt, ok := wire.ParseAttempt(r.Header.Get(ack.AttemptHeader))
	if !ok {
		jsonbody.Invalid(w, &ack.ValidationError{Fields: []ack.FieldError{{Field: ack.AttemptHeader, Rule: "attempt"}}})
		return
	}
	var c ack.Command
	if !jsonbody.Decode(w, body, &c, false) {
		return
	}
	if signsOther(principal, c.DedupeKey()) {
		answer(w, errSignedIdentity)
		return
	}
	key := protocol.InboxKey{Sender: principal.Sender, Key: c.DedupeKey(), PayloadSHA256: ack.Digest(body)}
	b, fresh, err := s.process(ctx, key, c, body, attempt)
	if err != nil {
		answer(w, err)
		return
	}
	if !fresh {
		markDuplicate(w)
	}
	writeAck(w, b)
}

// process records the command and applies it in one transaction,
// returning the response to answer (the stored one for a redelivery) and
// whether it was applied now. The contract and the attempt are judged only
// once the Inbox has found the command fresh: a redelivery of a command
// already applied gets its stored response, even from a source since
// upgraded to another contract or at an attempt beyond the command's
// source_max_attempts.
func (s *Source) process(ctx context.Context, key protocol.InboxKey, c ack.Command, body []byte, attempt int) ([]byte, bool, error) {
	inbox := protocol.InboxFor(s.cfg.Store)
	s.unreleased.releaseRemembered(ctx, inbox, key) // before Begin, which on SQLite holds the one writer
	tx, err := s.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, false, fromStore(err)
	}
	receipt, err := inbox.Record(ctx, tx, key)
	if stored, answered, err := answeredBy(receipt, err); answered {
		tx.Rollback()
		return stored, false, err
	}
	// The record, fresh in tx, is fenced by its token: the function may
	// end tx itself, and what it committed is this request's record only.
	mine := protocol.InboxClaim{Key: key, Token: receipt.Token}
	settled := false
	defer func() {
		// A function that committed tx itself and then failed (or
		// panicked, or the request ended) left the record committed
		// processing: every redelivery would be answered in_progress, for
		// good. It is given back, and the sender's retry runs the
		// function again. A transaction database/sql rolled back as the
		// request ended took the record with it: the fenced release then
		// finds none.
		if !settled && errors.Is(tx.Rollback(), sql.ErrTxDone) {
			s.unreleased.giveBack(ctx, inbox, mine, s.front.logger)
		}
	}()
	if c.CapabilitiesSHA256 != s.cfg.CapabilitiesSHA256 {
		return nil, false, errContractChanged
	}
	if attempt > c.SourceMaxAttempts {
		return nil, false, Reject(courier.CodeSourceAttemptsExhausted, "the command's source_max_attempts is spent")
	}
	status := ack.CommandApplied
	if err := runFunc(s.front.tracer, ctx, alreadyApplied, func(ctx context.Context) error { return s.fn(writerctx.WithHeld(ctx), tx, c) }); alreadyApplied(err) {
		status = ack.CommandAlreadyApplied
	} else if err != nil {
		// Rolled back now, the record goes with it; a transaction that
		// cannot be rolled back ended with its connection, uncommitted:
		// neither leaves a record to give back. One already done (the
		// function committed it) is left to the deferred give-back.
		rollback := tx.Rollback()
		settled = !errors.Is(rollback, sql.ErrTxDone)
		return nil, false, fromFunc(ctx, inbox, err, rollback)
	}
	b := commandresponse.Bytes(commandresponse.For(c, body, attempt, status))
	if err := inbox.Complete(ctx, tx, key, b); err != nil {
		// Whatever ended tx, it is settled here: the give-back above is
		// for a record the function committed and nothing completed.
		settled = true
		switch rollback := tx.Rollback(); {
		case errors.Is(rollback, sql.ErrTxDone):
			// The transaction is done: the function ended it, or
			// database/sql did as the request ended (which took the record
			// with it).
			return b, true, s.completeAlone(ctx, mine, b)
		case status == ack.CommandAlreadyApplied:
			// Rolled back, the record with it. On PostgreSQL a statement of
			// the function that failed (finding the effect there) leaves
			// the transaction unable to go on: the command is recorded
			// anew. A store that failed fails that too.
			return s.recordAlone(ctx, key, b)
		}
		// Rolled back, the record with it (or ended with its connection,
		// uncommitted): nothing to give back.
		return nil, false, fromInbox(err)
	}
	settled = true
	if err := commit(ctx, tx); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// alreadyApplied reports whether err, the function's, says the command's
// effect was present already (ErrAlreadyApplied): a success.
func alreadyApplied(err error) bool { return errors.Is(err, ErrAlreadyApplied) }

// recordAlone records a command already applied, with its response b, in
// a transaction of its own, after the function's transaction could not
// store it: the function found the command's effect present by a write
// that failed, and on PostgreSQL a failed statement leaves its
// transaction unable to commit anything. The function's writes are not
// kept (that transaction could commit none of them); the function is not
// run again. A request that recorded the key meanwhile answers as a
// redelivery would be.
func (s *Source) recordAlone(ctx context.Context, key protocol.InboxKey, b []byte) ([]byte, bool, error) {
	inbox := protocol.InboxFor(s.cfg.Store)
	tx, err := s.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, false, fromStore(err)
	}
	defer tx.Rollback() // after Commit, a no-op
	if stored, answered, err := answeredBy(inbox.RecordCompleted(ctx, tx, key, b)); answered {
		return stored, false, err
	}
	if err := commit(ctx, tx); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// completeAlone stores a command's response after its function ended the
// transaction itself. If the function committed, the command is applied
// and its record (mine), committed still processing, waits for the
// response, which a redelivery would otherwise never get: it is stored in
// a transaction of its own. If the function rolled back, this request's
// record is gone (another request's may stand in its place, which the
// token tells apart), and the function failed.
//
// The response is stored even if the request has ended meanwhile, for the
// redelivery. If it cannot be, the record is given back instead, so that
// the redelivery runs the function again rather than find the command in
// progress for good.
func (s *Source) completeAlone(ctx context.Context, mine protocol.InboxClaim, b []byte) error {
	inbox := protocol.InboxFor(s.cfg.Store)
	stored := func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWindow)
		defer cancel()
		tx, err := s.cfg.Store.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback() // after Commit, a no-op
		if err := inbox.CompleteClaim(ctx, tx, mine, b); err != nil {
			return err
		}
		return tx.Commit()
	}()
	switch {
	case errors.Is(stored, courier.CodeLeaseLost) && ctx.Err() != nil: // rolled back as the request ended
		return fromStore(ctx.Err())
	case errors.Is(stored, courier.CodeLeaseLost): // not this request's record: the function rolled back
		return fromApp(errTxEnded)
	case stored != nil:
		s.unreleased.giveBack(ctx, inbox, mine, s.front.logger)
		return fromStore(stored)
	}
	s.front.logger.WarnContext(ctx, errTxEnded.Error()) // stored: the redelivery is answered from it
	return nil
}
