package handler

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/store"
)

// CodeSourceAttemptsExhausted refuses a new command received at an attempt
// beyond its source_max_attempts.
const CodeSourceAttemptsExhausted courier.Code = "source_attempts_exhausted"

// ErrAlreadyApplied is returned by a Source's Func when the command's
// effect was already present: the Source then commits and answers with
// status already_applied instead of applied.
var ErrAlreadyApplied = errors.New("handler: command already applied")

// Source is the source side of the source-delivery profile: an
// http.Handler that applies each ack.Command exactly once and answers with
// the ack.CommandResponse that binds the command's identity, the digest of
// the exact body, the capabilities digest, the attempt it saw (the
// Courier-Attempt header) and the source's budget. The response is stored
// in the Inbox with the command and replayed byte for byte to every
// redelivery. Beyond Receiver's answers it refuses:
//
//	400 validation_failed           Courier-Attempt missing or not 1..1000
//	409 contract_changed            the command was built for another capabilities digest
//	422 source_attempts_exhausted   a new command at an attempt beyond source_max_attempts
type Source struct {
	cfg          Config
	capabilities string
	fn           Func[ack.Command]
	h            http.Handler
}

// NewSource returns a Source serving the contract whose capabilities digest
// is capabilitiesSHA256 (64 lowercase hex), running fn once per command.
func NewSource(cfg Config, capabilitiesSHA256 string, fn Func[ack.Command]) (*Source, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	switch {
	case fn == nil:
		return nil, configError("the source's Func is required")
	case !ack.IsDigest(capabilitiesSHA256):
		return nil, configError("the capabilities digest must be 64 lowercase hex")
	}
	s := &Source{cfg: cfg, capabilities: capabilitiesSHA256, fn: fn}
	s.h = front(cfg, s.receive)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Source) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

func (s *Source) receive(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, _ := middleware.BodyFromContext(ctx)
	principal, _ := middleware.PrincipalFromContext(ctx)
	attempt, ok := ack.ParseAttempt(r.Header.Get(ack.AttemptHeader))
	if !ok {
		badRequest(w, &ack.ValidationError{Fields: []ack.FieldError{{Field: ack.AttemptHeader, Rule: "attempt"}}})
		return
	}
	var c ack.Command
	if !s.decode(w, body, &c) {
		return
	}
	if c.CapabilitiesSHA256 != s.capabilities {
		problem.Error(w, http.StatusConflict, courier.CodeContractChanged, "the command was built for another contract")
		return
	}
	if !signedIdentity(w, r, c.DedupeKey()) {
		return
	}
	key := store.InboxKey{Sender: principal.Sender, Key: c.DedupeKey(), PayloadSHA256: ack.Digest(body)}
	answer, err := s.process(ctx, key, c, body, attempt)
	var rej *Rejection
	switch {
	case err == nil:
		writeAck(w, answer)
	case errors.Is(err, courier.ErrIdempotencyCollision):
		problem.Error(w, http.StatusConflict, courier.CodeIdempotencyCollision, "this command was received with another body")
	case errors.Is(err, errInProgress):
		problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeInProgress, "this command is being processed", retryInProgress)
	case errors.As(err, &rej):
		s.cfg.Logger.InfoContext(ctx, "handler: command rejected", slog.String("code", string(rej.Code)))
		problem.Error(w, http.StatusUnprocessableEntity, rej.Code, rej.Detail)
	default:
		s.cfg.Logger.ErrorContext(ctx, "handler: command failed", slog.String("code", string(courier.CodeHandlerFailed)), slog.Any("error", err))
		problem.Error(w, http.StatusInternalServerError, courier.CodeHandlerFailed, "processing failed; retry later")
	}
}

// decode parses and validates a command strictly, answering 400 itself
// when it cannot.
func (s *Source) decode(w http.ResponseWriter, body []byte, c *ack.Command) bool {
	if err := ack.Check(body); err != nil {
		code := courier.CodeMalformedJSON
		if errors.Is(err, ack.ErrDuplicateKey) {
			code = courier.CodeDuplicateKey
		}
		problem.Error(w, http.StatusBadRequest, code, "the body is not a valid JSON document")
		return false
	}
	if err := c.UnmarshalJSON(body); err != nil {
		badRequest(w, ack.DecodeError(err))
		return false
	}
	if err := ack.Validate(*c); err != nil {
		var ve *ack.ValidationError
		errors.As(err, &ve)
		badRequest(w, ve)
		return false
	}
	return true
}

// process records the command and applies it in one transaction,
// returning the response to answer: the stored one for a redelivery.
func (s *Source) process(ctx context.Context, key store.InboxKey, c ack.Command, body []byte, attempt int) ([]byte, error) {
	tx, err := s.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() // after Commit, a no-op
	receipt, err := s.cfg.Store.Inbox.Record(ctx, tx, key)
	switch {
	case err != nil:
		return nil, err
	case receipt.InProgress:
		return nil, errInProgress
	case !receipt.Fresh:
		return receipt.Ack, nil
	case attempt > c.SourceMaxAttempts:
		return nil, Reject(CodeSourceAttemptsExhausted, "the command's source_max_attempts is spent")
	}
	status := ack.CommandApplied
	if err := s.fn(ctx, tx, c); errors.Is(err, ErrAlreadyApplied) {
		status = ack.CommandAlreadyApplied
	} else if err != nil {
		return nil, err
	}
	b := ack.NewCommandResponse(c, body, attempt, status).Marshal()
	if err := s.cfg.Store.Inbox.Complete(ctx, tx, key, b); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return b, nil
}
