package handler

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/store"
)

// HeaderIdempotencyKey names the header a publisher sends to make a
// request safe to retry.
const HeaderIdempotencyKey = "Idempotency-Key"

// PublishRequest is the body other services POST to a Publish handler:
// either an event fanned out to the tenant's matching subscriptions, or
// one notification to one endpoint.
type PublishRequest struct {
	// Fan-out: Tenant, EventType and EventID.
	Tenant    string `json:"tenant,omitempty" validate:"required_without=Endpoint,omitempty,max=256"`
	EventType string `json:"event_type,omitempty" validate:"required_with=Tenant,omitempty,courier_token"`
	EventID   string `json:"event_id,omitempty" validate:"required_with=Tenant,omitempty,courier_token"`
	// One delivery: NotificationID and Endpoint.
	NotificationID string `json:"notification_id,omitempty" validate:"required_with=Endpoint,omitempty,courier_token"`
	Endpoint       string `json:"endpoint,omitempty" validate:"excluded_with=Tenant,omitempty,url,max=2048"`
	// Payload is the notification's JSON object; it is stored and sent in
	// canonical form.
	Payload json.RawMessage `json:"payload" validate:"required"`
}

// PublishResponse is the 202 answer.
type PublishResponse struct {
	NotificationIDs []string `json:"notification_ids"`
}

// Publish is an http.Handler other services POST events to. It
// authenticates its callers with the configured scheme, validates the
// request, and enqueues (or fans out) inside one transaction per request.
// A request carrying an Idempotency-Key is answered once: the same key
// and body again get the same response, byte for byte, with nothing
// enqueued twice; the same key with another body is 409.
type Publish struct {
	cfg Config
	h   http.Handler
}

// NewPublish returns a Publish handler. cfg.Verifier authenticates the
// callers (a Bearer verifier, typically).
func NewPublish(cfg Config) (*Publish, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Publish{cfg: cfg}
	p.h = front(cfg, p.publish)
	return p, nil
}

// ServeHTTP implements http.Handler.
func (p *Publish) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.h.ServeHTTP(w, r) }

func (p *Publish) publish(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, _ := middleware.BodyFromContext(ctx)
	principal, _ := middleware.PrincipalFromContext(ctx)
	idemKey := r.Header.Get(HeaderIdempotencyKey)
	if idemKey != "" && !ack.IsToken(idemKey) {
		problem.Error(w, http.StatusBadRequest, courier.CodeValidation, "Idempotency-Key must be 1-256 of A-Z a-z 0-9 _ . : -")
		return
	}
	var req PublishRequest
	if !decodeStrict(w, body, &req, false) {
		return
	}
	payload, err := ack.Canonical(req.Payload)
	if err != nil || len(payload) == 0 || payload[0] != '{' {
		badRequest(w, &ack.ValidationError{Fields: []ack.FieldError{{Field: "payload", Rule: "object"}}})
		return
	}
	resp, err := p.enqueue(ctx, principal.Sender, idemKey, body, req, payload)
	var ve *ack.ValidationError
	switch {
	case err == nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(resp)
	case errors.Is(err, courier.ErrIdempotencyCollision):
		problem.Error(w, http.StatusConflict, courier.CodeIdempotencyCollision, "this Idempotency-Key was used with another request, or this notification exists with another payload")
	case errors.As(err, &ve):
		badRequest(w, ve)
	case courier.CodeOf(err) == courier.CodeInvalidArgument:
		problem.Error(w, http.StatusBadRequest, courier.CodeValidation, "the notification was refused")
	default:
		p.cfg.Logger.ErrorContext(ctx, "handler: publish failed", slog.Any("error", err))
		problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeInternal, "publishing failed; retry", retryInProgress)
	}
}

// enqueue does the request's work in one transaction and returns the
// response body.
func (p *Publish) enqueue(ctx context.Context, sender, idemKey string, body []byte, req PublishRequest, payload []byte) ([]byte, error) {
	s := p.cfg.Store
	tx, err := s.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	key := store.InboxKey{Sender: "publish/" + sender, Key: idemKey, PayloadSHA256: ack.Digest(body)}
	if idemKey != "" {
		receipt, err := s.Inbox.Record(ctx, tx, key)
		switch {
		case err != nil:
			return nil, err
		case !receipt.Fresh:
			return receipt.Ack, nil // the same request again: the same answer
		}
	}
	ids, err := p.apply(ctx, tx, req, payload)
	if err != nil {
		return nil, err
	}
	resp, err := json.Marshal(PublishResponse{NotificationIDs: ids})
	if err != nil {
		return nil, err
	}
	if idemKey != "" {
		if err := s.Inbox.Complete(ctx, tx, key, resp); err != nil {
			return nil, err
		}
	}
	return resp, tx.Commit()
}

func (p *Publish) apply(ctx context.Context, tx *sqlx.Tx, req PublishRequest, payload []byte) ([]string, error) {
	outbox := p.cfg.Store.Outbox
	if req.Endpoint != "" {
		if _, err := outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: req.NotificationID, Endpoint: req.Endpoint, Payload: payload}); err != nil {
			return nil, err
		}
		return []string{req.NotificationID}, nil
	}
	published, err := outbox.Publish(ctx, tx, store.PublishParams{
		Tenant: req.Tenant, EventType: req.EventType, EventID: req.EventID,
		Build: func(sub store.Subscription, idempotencyKey string) ([]byte, error) {
			if sub.Profile != ack.ProfileReporting {
				return payload, nil
			}
			// Receivers that dedupe by idempotency_key get a fresh one
			// per delivery, in the bytes every retry sends.
			var m map[string]json.RawMessage
			if err := json.Unmarshal(payload, &m); err != nil {
				return nil, err
			}
			m["idempotency_key"], _ = json.Marshal(idempotencyKey)
			return ack.Marshal(m)
		},
	})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(published))
	for _, d := range published {
		ids = append(ids, d.NotificationID)
	}
	return ids, nil
}
