// Package handler holds courier's http.Handlers: receivers that accept
// notifications exactly once (Receiver, Terminal) and the sender side's
// surfaces.
//
// A receiver checks a request in a fixed order, and refuses it at the
// first failure with an application/problem+json body carrying a stable
// code; nothing is written for a refused request:
//
//	405 method_not_allowed      not POST
//	415 unsupported_media_type  not application/json
//	413 body_too_large          over MaxBodyBytes
//	401 <signature code>        the signature does not verify (WWW-Authenticate says why)
//	400 malformed_json, duplicate_json_key, validation_failed (with the failing fields)
//	409 idempotency_collision   the notification was received before with another body
//	422 rejected                the application refused it for good (see Reject)
//	500 handler_failed          the application's function failed; the sender retries
//
// An accepted notification is recorded in the Inbox, processed by the
// application's function and acknowledged, all in one transaction; a
// redelivery gets the stored Ack byte for byte, without running the
// function again.
package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// DefaultMaxBodyBytes bounds a request body unless Config says otherwise.
const DefaultMaxBodyBytes = 1 << 20

// Func is the application's side of a receiver: it applies notification n
// using tx, the transaction the Inbox record is written in, so its effects
// in that database happen exactly once. An error rolls everything back: a
// *Rejection refuses the notification for good (422), any other error
// answers 500 and the sender retries. tx comes from Store.Begin: write
// through tx only, since on SQLite a second write transaction, or a
// store method that writes, waits until this one ends.
type Func[T any] func(ctx context.Context, tx *sqlx.Tx, n T) error

// Config configures a receiver.
type Config struct {
	// Store holds the Inbox. Required.
	Store *store.Store
	// Verifier checks each request's signature; the verified sender is the
	// dedupe namespace. Required: a receiver never accepts unsigned input.
	Verifier signature.Verifier
	// MaxBodyBytes bounds the request body. Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// AllowUnknownFields accepts JSON members the payload type does not
	// declare. Defaults to false: they are refused with validation_failed.
	AllowUnknownFields bool
	// Logger receives one line per refused or failed request. Defaults to
	// discarding.
	Logger *slog.Logger
	// Hook receives an Event per answered request, for metrics. It must be
	// quick. Defaults to none.
	Hook func(Event)
}

// Outcomes a receiver reports in Events.
const (
	OutcomeAccepted  = "accepted"  // processed now
	OutcomeDuplicate = "duplicate" // answered from the Inbox
	OutcomeRejected  = "rejected"  // refused: 4xx
	OutcomeFailed    = "failed"    // 5xx: the sender retries
)

// Event reports one answered request. No content, only codes.
type Event struct {
	Outcome string
	Status  int
	Code    courier.Code
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Store == nil:
		return configError("Config.Store is required")
	case c.Verifier == nil:
		return configError("Config.Verifier is required")
	case c.MaxBodyBytes < 0:
		return configError("Config.MaxBodyBytes must not be negative")
	}
	return nil
}

func configError(msg string) error {
	return courier.Wrap(courier.ErrConfigInvalid, courier.CodeConfigInvalid, "handler: "+msg)
}

// Receiver is an http.Handler that accepts notifications of type T exactly
// once. T is decoded from the body with encoding/json (strictly: see
// Config.AllowUnknownFields), validated with validator/v10 tags and, if it
// implements ack.Checker, its own Check. The Ack is T's own when T is an
// ack.Acker, courier's otherwise.
type Receiver[T ack.Notification] struct {
	cfg Config
	fn  Func[T]
	h   http.Handler
}

// NewReceiver returns a Receiver that runs fn for each new notification.
func NewReceiver[T ack.Notification](cfg Config, fn Func[T]) (*Receiver[T], error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, configError("the receiver's Func is required")
	}
	r := &Receiver[T]{cfg: cfg, fn: fn}
	r.h = front(cfg, r.receive)
	return r, nil
}

// ServeHTTP implements http.Handler.
func (rc *Receiver[T]) ServeHTTP(w http.ResponseWriter, r *http.Request) { rc.h.ServeHTTP(w, r) }

// front is the way in of every handler here: the answer is reported to
// the hook; then 405 and 415; then the body is read, bounded (413), and
// its signature verified (401) before receive sees it.
func front(cfg Config, receive http.HandlerFunc) http.Handler {
	verified := middleware.Verify(cfg.Verifier, middleware.BodyLimits{MaxBytes: cfg.MaxBodyBytes})(receive)
	checked := func(w http.ResponseWriter, r *http.Request) {
		if postJSON(w, r) {
			verified.ServeHTTP(w, r)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		observe(cfg.Hook, w, r, checked)
	})
}

// postJSON answers 405 to anything but POST and 415 to anything but
// JSON, the first two checks of every handler here, and reports whether
// the request passed them.
func postJSON(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		problem.Error(w, http.StatusMethodNotAllowed, courier.CodeMethodNotAllowed, "use POST")
		return false
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		problem.Error(w, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType, "use application/json")
		return false
	}
	return true
}

// isJSON accepts application/json with optional parameters (charset=utf-8).
func isJSON(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || cs == "utf-8" || cs == "UTF-8"
}

// receive runs behind signature verification.
func (rc *Receiver[T]) receive(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, _ := middleware.BodyFromContext(ctx)
	principal, _ := middleware.PrincipalFromContext(ctx)
	n, ok := rc.decode(w, body)
	if !ok {
		return
	}
	if !signedIdentity(w, r, n.DedupeKey()) {
		return
	}
	key := store.InboxKey{Sender: principal.Sender, Key: n.DedupeKey(), PayloadSHA256: ack.Digest(body)}
	answer, fresh, err := rc.process(ctx, key, n, body)
	switch {
	case err == nil:
		if !fresh {
			markDuplicate(w)
		}
		writeAck(w, answer)
	case errors.Is(err, courier.ErrIdempotencyCollision):
		problem.Error(w, http.StatusConflict, courier.CodeIdempotencyCollision, "this notification was received with another body")
	case errors.Is(err, errInProgress):
		problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeInProgress, "this notification is being processed", retryInProgress)
	default:
		var rej *Rejection
		if errors.As(err, &rej) {
			rc.cfg.Logger.InfoContext(ctx, "handler: notification rejected", slog.String("code", string(rej.Code)))
			problem.Error(w, http.StatusUnprocessableEntity, rej.Code, rej.Detail)
			return
		}
		rc.cfg.Logger.ErrorContext(ctx, "handler: processing failed", slog.String("code", string(courier.CodeHandlerFailed)), slog.Any("error", err))
		problem.Error(w, http.StatusInternalServerError, courier.CodeHandlerFailed, "processing failed; retry later")
	}
}

// decode parses and validates the body, answering 400 itself when it
// cannot.
func (rc *Receiver[T]) decode(w http.ResponseWriter, body []byte) (T, bool) {
	var n T
	ok := decodeStrict(w, body, &n, rc.cfg.AllowUnknownFields)
	return n, ok
}

// decodeStrict parses body into v (refusing malformed JSON and duplicate
// keys) and validates it, answering 400 itself when it cannot.
func decodeStrict(w http.ResponseWriter, body []byte, v any, allowUnknown bool) bool {
	if err := ack.Check(body); err != nil {
		malformed(w, err)
		return false
	}
	return decodeChecked(w, body, v, allowUnknown)
}

// decodeChecked is decodeStrict for a body already parsed strictly.
func decodeChecked(w http.ResponseWriter, body []byte, v any, allowUnknown bool) bool {
	if err := decodeJSON(body, v, allowUnknown); err != nil {
		badRequest(w, ack.DecodeError(err))
		return false
	}
	if err := ack.Validate(v); err != nil {
		var ve *ack.ValidationError
		errors.As(err, &ve)
		badRequest(w, ve)
		return false
	}
	return true
}

// malformed answers 400 for a body that is not one JSON document:
// duplicate_json_key or malformed_json.
func malformed(w http.ResponseWriter, err error) {
	code := courier.CodeMalformedJSON
	if errors.Is(err, ack.ErrDuplicateKey) {
		code = courier.CodeDuplicateKey
	}
	problem.Error(w, http.StatusBadRequest, code, "the body is not a valid JSON document")
}

func badRequest(w http.ResponseWriter, ve *ack.ValidationError) {
	p := problem.New(http.StatusBadRequest, courier.CodeValidation, "the notification is not valid")
	if ve != nil {
		for _, f := range ve.Fields {
			p.Errors = append(p.Errors, problem.FieldError{Field: f.Field, Rule: f.Rule})
		}
	}
	problem.Write(w, p)
}

// errInProgress is a duplicate whose first delivery is still processing.
var errInProgress = errors.New("handler: in progress")

// process records the notification and runs the application's function
// in one transaction, returning the Ack to answer and whether it was
// processed now (false: a duplicate answered from the Inbox). The Ack is
// bound to the bytes received, not to what the function does, so it is
// built first and recorded with the key in one statement; a failing
// function rolls both back.
func (rc *Receiver[T]) process(ctx context.Context, key store.InboxKey, n T, body []byte) ([]byte, bool, error) {
	a, err := ackFor(n, key.Key, body)
	if err != nil {
		return nil, false, err
	}
	b := a.Marshal()
	tx, err := rc.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback() // after Commit, a no-op
	receipt, err := rc.cfg.Store.Inbox.RecordCompleted(ctx, tx, key, b)
	switch {
	case err != nil:
		return nil, false, err
	case receipt.InProgress:
		return nil, false, errInProgress
	case !receipt.Fresh:
		return receipt.Ack, false, nil
	}
	if err := rc.fn(ctx, tx, n); err != nil {
		return nil, false, err
	}
	if err := tx.Commit(); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// ackFor builds the Ack for n received as body.
func ackFor(n any, id string, body []byte) (ack.Ack, error) {
	if a, ok := n.(ack.Acker); ok {
		return a.Ack(body)
	}
	return ack.New(id, body), nil
}

func writeAck(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// signedIdentity refuses a request whose signed webhook-id (Standard
// Webhooks signs it with the body) names another notification than the
// body does: the identity a receiver dedupes by must be the one signed.
func signedIdentity(w http.ResponseWriter, r *http.Request, key string) bool {
	if id := r.Header.Get("webhook-id"); id != "" && id != key {
		badRequest(w, &ack.ValidationError{Fields: []ack.FieldError{{Field: "notification_id", Rule: "webhook_id"}}})
		return false
	}
	return true
}

// exactNames refuses members whose names match one of v's JSON fields
// only case-insensitively: encoding/json would take them for that field,
// so a body could carry its identity under a name no one checks.
func exactNames(body []byte, v any) error {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return nil // not an object: decoding reports it
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var fe []ack.FieldError
	for name := range members {
		for i := range t.NumField() {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if tag != "" && tag != "-" && tag != name && strings.EqualFold(tag, name) {
				fe = append(fe, ack.FieldError{Field: name, Rule: "unknown"})
			}
		}
	}
	if fe != nil {
		return &ack.ValidationError{Fields: fe}
	}
	return nil
}

// decodeJSON decodes a body ack.Check has accepted into v.
func decodeJSON(body []byte, v any, allowUnknown bool) error {
	if err := exactNames(body, v); err != nil {
		return err
	}
	if allowUnknown {
		return json.Unmarshal(body, v)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
