package handler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/reportkey"
	"github.com/courier-go/courier/internal/wire"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/jsonbody"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// headerIdempotencyKey names the header a publisher sends to make a
// request safe to retry (see Publish).
const headerIdempotencyKey = "Idempotency-Key"

// publishRequest is the body other services POST to a Publish handler:
// either an event fanned out to the tenant's matching subscriptions, or
// one notification to one endpoint, each with its own members only.
type publishRequest struct {
	// Fan-out: Tenant, EventType and EventID. Tenant is at most 256 bytes
	// (see Check).
	Tenant    string `json:"tenant,omitempty" validate:"required_without=Endpoint,omitempty,max=256"`
	EventType string `json:"event_type,omitempty" validate:"excluded_with=Endpoint,required_with=Tenant,omitempty,courier_token"`
	// EventID is at most store.MaxEventIDSize (see Check).
	EventID string `json:"event_id,omitempty" validate:"excluded_with=Endpoint,required_with=Tenant,omitempty,courier_token"`
	// One delivery: NotificationID and Endpoint. Endpoint is an http or
	// https URL of at most store.MaxEndpointSize bytes (see Check).
	NotificationID string `json:"notification_id,omitempty" validate:"excluded_with=Tenant,required_with=Endpoint,omitempty,courier_token"`
	Endpoint       string `json:"endpoint,omitempty" validate:"excluded_with=Tenant,omitempty,url,max=2048"`
	// Payload is the notification's JSON object; it is stored and sent in
	// canonical form.
	Payload json.RawMessage `json:"payload" validate:"required"`
}

// payloadTooLarge refuses a payload over store.MaxPayloadSize in the
// form it would be stored in: canonical, and for a reporting
// subscription with its idempotency_key.
func payloadTooLarge() *ack.ValidationError {
	return &ack.ValidationError{Fields: []ack.FieldError{{Field: "payload", Rule: "max"}}}
}

// maxTenant bounds a tenant, in bytes, as store.SubscriptionParams.Tenant.
const maxTenant = 256

// Check applies the rules the tags cannot state, so that what the outbox
// would refuse is refused here, naming its field, before Authorize sees
// it: a tenant is at most maxTenant bytes of text without NUL (a tag
// counts characters); event_id leaves room for the ":" and subscription
// id each delivery's notification id adds (store.MaxEventIDSize); an
// endpoint is an absolute http or https URL with a host, at most
// store.MaxEndpointSize bytes (rule url), whose port, if it names one, is
// 1 to 65535 (rule port), and whose host is ASCII without a trailing dot
// (rule host: the one spelling of the host dialed, which Authorize then
// judges), as the outbox asks of a new endpoint.
func (r publishRequest) Check() error {
	var fields []ack.FieldError
	switch {
	case len(r.Tenant) > maxTenant:
		fields = append(fields, ack.FieldError{Field: "tenant", Rule: "max"})
	case strings.IndexByte(r.Tenant, 0) >= 0:
		fields = append(fields, ack.FieldError{Field: "tenant", Rule: "text"})
	}
	if len(r.EventID) > store.MaxEventIDSize {
		fields = append(fields, ack.FieldError{Field: "event_id", Rule: "max"})
	}
	switch {
	case r.Endpoint == "":
	case !endpoint.Valid(r.Endpoint):
		fields = append(fields, ack.FieldError{Field: "endpoint", Rule: "url"})
	case !endpoint.Dialable(r.Endpoint):
		fields = append(fields, ack.FieldError{Field: "endpoint", Rule: "port"})
	case !endpoint.HostAsDialed(r.Endpoint):
		fields = append(fields, ack.FieldError{Field: "endpoint", Rule: "host"})
	}
	if len(fields) > 0 {
		return &ack.ValidationError{Fields: fields}
	}
	return nil
}

// publishResponse is the 202 answer.
type publishResponse struct {
	NotificationIDs []string `json:"notification_ids"`
}

// PublishTarget is what a publish request asks to have signed and sent:
// either a fan-out (Tenant and EventType: the tenant's subscriptions to
// that event type) or one delivery (Endpoint and NotificationID: the
// caller's own choice of URL). Exactly one of Tenant and Endpoint is set,
// and only the members of its kind: a request that mixes the two is
// refused before Authorize is asked. Endpoint is the URL the delivery is
// stored under and sent to: the one requested, with its scheme and host
// in lower case and without the scheme's default port (see
// store.Endpoints), so that a policy compares one spelling of it.
type PublishTarget struct {
	Tenant         string
	EventType      string
	Endpoint       string
	NotificationID string
}

// AuthorizeOwnTenant is the publish policy used when
// PublishConfig.Authorize is nil: a principal may fan out to the tenant
// named exactly as its sender (signature.Principal.Sender, the name the
// verifier is configured with), and to no other; it may never choose an
// endpoint. Its refusals have code forbidden (errors.Is(err,
// courier.CodeForbidden)).
func AuthorizeOwnTenant(_ context.Context, p signature.Principal, t PublishTarget) error {
	switch {
	case t.Endpoint != "":
		return &coded.Error{Code: courier.CodeForbidden, Msg: "handler: publishing to a caller-chosen endpoint needs PublishConfig.Authorize"}
	case p.Sender == "" || t.Tenant != p.Sender:
		return &coded.Error{Code: courier.CodeForbidden, Msg: "handler: a publisher may fan out to its own tenant only"}
	}
	return nil
}

// PublishConfig configures a Publish handler. It has no
// AllowUnknownFields: a publish request's body is always decoded
// strictly, and a member it does not declare is refused with
// validation_failed.
type PublishConfig struct {
	// Store holds the Outbox the requests are enqueued into, and the
	// Idempotency-Key records, in its Inbox: store.Inbox.Prune deletes
	// them, as a receiver's (see store's Retention), so a Store that
	// serves Publish alone needs that prune too. Required.
	Store *store.Store
	// Verifier authenticates the callers (a Bearer verifier, typically);
	// the verified principal is what Authorize decides on. Required.
	Verifier signature.Verifier
	// Authorize decides whether principal p may publish to target t,
	// before anything is stored: nil allows, an error refuses with 403
	// forbidden (whatever the error: a policy that cannot decide refuses).
	//
	// The right to publish to an endpoint is the right to have any payload
	// signed with the sender's key for it: the worker signs what it
	// delivers, so a caller that chooses both endpoint and payload can
	// capture the signed request at an endpoint it controls and replay it
	// to any receiver that trusts the key. Allow caller-chosen endpoints
	// (t.Endpoint) only to callers trusted with the key itself, and
	// fan-out only to the tenants the caller speaks for. A caller-chosen
	// notification id is also of the same kind as a fan-out's delivery's
	// (event_id ":" subscription id): a caller that may publish to the
	// endpoint of another tenant's subscription can take the identity of
	// that tenant's delivery first, so that its publish of the event is
	// 409 idempotency_collision, and so learn whether the event was
	// published.
	//
	// Defaults to AuthorizeOwnTenant: no caller-chosen endpoint, fan-out
	// to the tenant named as the principal's sender only. That is safe as
	// long as sender names and tenant names are one namespace (a sender
	// named like another tenant could fan out to it); when they are not,
	// or some callers may publish for several tenants, set Authorize.
	Authorize func(ctx context.Context, p signature.Principal, t PublishTarget) error
	// Body, Logger and Hook are as in ReceiverConfig.
	Body   middleware.BodyLimits
	Logger *slog.Logger
	Hook   func(Event)
}

// Publish is an http.Handler other services POST events to. It
// authenticates its callers with the configured scheme, validates the
// request (strictly: unknown members are refused), asks
// PublishConfig.Authorize whether the caller may publish to the target,
// and enqueues (or fans out) inside one transaction per request. A request
// carrying an Idempotency-Key (one: two are 400) is answered once: the
// same key and request again get the same response, byte for byte, with
// nothing enqueued twice; the same key with another request is 409. A
// request is judged on what it asks, its payload in the canonical form it
// is stored in: serialized again with other white space, key order,
// escapes or spellings of one float (1.5, 1.50, 15e-1) it is the same
// request, while one that would store another payload (another value, an
// integer where a float was) is another. A key names a request within a
// space of its own: a fan-out's key, within its tenant (for the verified
// sender: another sender's are another's); one delivery's, within the
// verified sender. So tenants whose publishers are one sender to the
// verifier (the tokens of one Bearer verifier, each authorized for its own
// tenant) never meet in one space: one tenant's key never answers, nor
// refuses, another's request. The publishers one sender names share its
// keys for one delivery: give callers that must not meet there verifiers
// of their own senders.
//
// Without a key, the outbox makes a request safe to retry: a delivery it
// holds already is found, not enqueued twice (store.Outbox.Publish,
// store.Outbox.Enqueue). An event published again after the tenant's
// subscriptions changed reaches them as they are now (new ones, new keys,
// resumed ones; see store.Outbox.Publish). An event_id or
// notification_id published before with another payload, or an event_id
// published before as another event_type, is 409 idempotency_collision,
// nothing enqueued (a subscription whose profile changed since takes the
// new payload: see store.Outbox.Publish).
//
// The request body is a JSON object, either a fan-out or one delivery:
//
//	{"tenant": "…", "event_type": "…", "event_id": "…", "payload": {…}}
//	{"notification_id": "…", "endpoint": "https://…", "payload": {…}}
//
// event_type, event_id and notification_id are tokens (1-256 of
// A-Z a-z 0-9 _ . : -; event_id at most store.MaxEventIDSize, 236, to
// leave room for the subscription id); tenant is at most 256 bytes; endpoint
// is an absolute http or https URL of at most store.MaxEndpointSize bytes,
// whose port, if it names one, is 1 to 65535, and whose host is ASCII (an
// internationalized name in its A-label form, xn--…) without a trailing
// dot;
// a member of the other shape is refused; payload is a JSON object, stored
// and sent in its canonical form. The answer is 202 with {"notification_ids": ["…", …]}:
// one per delivery a fan-out made, or the one delivery's.
//
// The payload stored is the canonical form, which can be longer than the
// payload sent (a number with an exponent is written out: 1e15 is
// 1000000000000000.0), and for a subscription of the reporting profile
// that form with the delivery's idempotency_key (store.Published's), in
// place of any idempotency_key the payload carries: a reporting receiver
// dedupes by it, so each delivery has its own, the same on every publish
// of the event; a reporting receiver reads every number as a double,
// so a fan-out to such a subscription of a payload holding an integer no
// float64 holds is refused, 400 validation_failed naming payload (rule
// finite), nothing stored. Over store.MaxPayloadSize it is
// refused, 400 validation_failed naming payload (rule max), nothing
// stored. Below that it is enqueued as store.Outbox.Enqueue takes it,
// over 1 MiB too: a courier receiver reads 1 MiB unless its
// Body.MaxBytes says otherwise and answers a larger body 413, which fails
// the delivery at its first attempt, so such a payload is for receivers
// configured to read it.
//
// Publishing is having payloads signed: the right to publish to an
// endpoint is the right to have a payload signed for it. See
// PublishConfig.Authorize.
type Publish struct {
	cfg PublishConfig
	h   http.Handler
}

// NewPublish returns a Publish handler.
func NewPublish(cfg PublishConfig) (*Publish, error) {
	f, err := newFront("PublishConfig", cfg.Store, cfg.Verifier, cfg.Body, cfg.Logger, cfg.Hook)
	if err != nil {
		return nil, err
	}
	if cfg.Authorize == nil {
		cfg.Authorize = AuthorizeOwnTenant
	}
	p := &Publish{cfg: cfg}
	p.h = f.handler(p.publish)
	return p, nil
}

// ServeHTTP implements http.Handler.
func (p *Publish) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.h.ServeHTTP(w, r) }

func (p *Publish) publish(w http.ResponseWriter, r *http.Request, body []byte, principal signature.Principal) {
	ctx := r.Context()
	// One key or none: a request with two means neither for sure, and
	// answering under one could take the publish for another's duplicate.
	if len(r.Header.Values(headerIdempotencyKey)) > 1 {
		jsonbody.Invalid(w, &ack.ValidationError{Fields: []ack.FieldError{{Field: headerIdempotencyKey, Rule: "single"}}})
		return
	}
	idemKey := r.Header.Get(headerIdempotencyKey)
	if idemKey != "" && !wire.IsToken(idemKey) {
		jsonbody.Invalid(w, &ack.ValidationError{Fields: []ack.FieldError{{Field: headerIdempotencyKey, Rule: "courier_token"}}})
		return
	}
	var req publishRequest
	if !jsonbody.Decode(w, body, &req, false) {
		return
	}
	payload, err := ack.Canonical(req.Payload)
	if err != nil || len(payload) == 0 || payload[0] != '{' {
		rule := "object"
		if errors.Is(err, canonical.ErrNotFinite) { // an object, with a number no float64 holds
			rule = "finite"
		}
		jsonbody.Invalid(w, &ack.ValidationError{Fields: []ack.FieldError{{Field: "payload", Rule: rule}}})
		return
	}
	if len(payload) > store.MaxPayloadSize { // the canonical form can be longer than the request's
		jsonbody.Invalid(w, payloadTooLarge())
		return
	}
	req.Endpoint = endpoint.Normalize(req.Endpoint) // what the outbox stores and sends to, and Authorize judges
	key := protocol.InboxKey{Sender: publishSender(principal.Sender, req.Tenant), Key: idemKey}
	if idemKey != "" {
		if key.PayloadSHA256, err = requestDigest(req, payload); err != nil {
			answer(w, err)
			return
		}
	}
	target := PublishTarget{Tenant: req.Tenant, EventType: req.EventType, Endpoint: req.Endpoint, NotificationID: req.NotificationID}
	if err := p.cfg.Authorize(ctx, principal, target); err != nil {
		// A refusal, whatever the error says (a rejection, a code of the
		// store's): answered 403 forbidden alone, none of it shown.
		answer(w, errForbidden)
		return
	}
	// A fan-out's payload is read for its reporting subscriptions here,
	// before the transaction: each of them then costs a copy.
	var reporting reportkey.Payload
	if req.Tenant != "" {
		reporting = reportkey.Read(payload)
	}
	resp, replayed, err := p.enqueue(ctx, key, publishSender(principal.Sender, ""), body, req, payload, reporting)
	if err != nil {
		answer(w, err)
		return
	}
	if replayed {
		markDuplicate(w)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(resp)
}

// enqueue does the request's work in one transaction and returns the
// response body, and whether it is the stored answer to the same request.
// key is the request's Idempotency-Key record, whose Key is empty for a
// request without one, and own the verified sender's own space of keys
// (see recordPublish); reporting is payload read for a fan-out's
// reporting subscriptions.
func (p *Publish) enqueue(ctx context.Context, key protocol.InboxKey, own string, body []byte, req publishRequest, payload []byte, reporting reportkey.Payload) ([]byte, bool, error) {
	s := p.cfg.Store
	tx, err := s.Begin(ctx)
	if err != nil {
		return nil, false, fromStore(err)
	}
	defer tx.Rollback()
	if key.Key != "" {
		receipt, err := recordPublish(ctx, protocol.InboxFor(s), tx, key, own, body)
		if stored, answered, err := answeredBy(receipt, err); answered {
			return stored, err == nil, err // the same request again: the same answer, or in_progress
		}
	}
	ids, err := p.apply(ctx, tx, req, payload, reporting)
	if errors.Is(err, courier.CodeIdempotencyCollision) {
		// The outbox's collision: not the Idempotency-Key's, whose body is
		// the request's; the outbox compares a delivery's content.
		err = fmt.Errorf("%w: %w", errPublishedBefore, err)
	}
	if err != nil {
		return nil, false, fromStore(err)
	}
	resp, err := json.Marshal(publishResponse{NotificationIDs: ids})
	if err != nil {
		return nil, false, err
	}
	if key.Key != "" {
		if err := protocol.InboxFor(s).Complete(ctx, tx, key, resp); err != nil {
			return nil, false, fromInbox(err)
		}
	}
	if err := commit(ctx, tx); err != nil {
		return nil, false, err
	}
	return resp, false, nil
}

// requestDigest is the digest a request's Idempotency-Key is recorded
// with: of what the request asks, its members as decoded and its payload
// in canonical form, the form it is stored in. A request serialized again
// another way (white space, key order, escapes, a member sent empty or
// null rather than left out, a float spelled otherwise) has the same one;
// a request that would store another payload, or target another event or
// endpoint, has another.
func requestDigest(req publishRequest, payload []byte) (string, error) {
	req.Payload = payload
	b, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	return ack.Digest(b), nil
}

// recordPublish records key, an Idempotency-Key with its request's
// requestDigest, in tx, under its space (publishSender); own is the
// verified sender's own space, where every key was recorded before a
// fan-out's were its tenant's. A key whose record there holds the digest
// of the request's bytes instead, as courier recorded publishes before it
// judged them by requestDigest, is found by those bytes: the same bytes
// again are the same request. A fan-out's key recorded in own for the
// same request (its digest names the tenant) is found there, answered as
// it was; one recorded there for another request is not the fan-out's
// concern (it may be another tenant's), and the key is recorded in the
// tenant's space.
func recordPublish(ctx context.Context, inbox protocol.Inbox, tx protocol.DBTX, key protocol.InboxKey, own string, body []byte) (protocol.Receipt, error) {
	raw := ack.Digest(body)
	if key.Sender != own {
		for _, digest := range []string{key.PayloadSHA256, raw} {
			receipt, found, err := inbox.Find(ctx, tx, protocol.InboxKey{Sender: own, Key: key.Key, PayloadSHA256: digest})
			if err != nil || found {
				return receipt, err
			}
		}
		return inbox.Record(ctx, tx, key)
	}
	receipt, err := inbox.Record(ctx, tx, key)
	if errors.Is(err, courier.CodeIdempotencyCollision) && raw != key.PayloadSHA256 {
		key.PayloadSHA256 = raw
		return inbox.Record(ctx, tx, key)
	}
	return receipt, err
}

// maxInboxSender is the longest sender the store's Inbox records: 256
// bytes of UTF-8 without NUL.
const maxInboxSender = 256

// publishSender is the Inbox sender a publish's Idempotency-Key is
// recorded under: the space of keys it is one of. A fan-out's is its
// tenant's, as the verified sender speaks for it (publishTenantSender);
// one delivery's is the verified sender's. Tenants whose publishers one
// verifier names alike (the tokens of one Bearer verifier, each
// authorized for its own tenant) so never meet in one space: none is
// answered 409 for a key another used, which would tell it the other's
// key, nor has its publish refused for a key another took first.
//
// A sender's own space is "publish/" and the verified sender, readable in
// courier_inbox, whenever the Inbox can record that: a sender of at most
// 248 bytes of text. A longer sender (a verifier allows 256 bytes), or one
// a custom Verifier made that is not text, gets "publish-sha256/" and the
// hex SHA-256 of its name instead, a form the first never takes. So every
// sender can use a key, and the keys recorded before stay where they were:
// the senders that get the digest could record none.
func publishSender(sender, tenant string) string {
	if tenant != "" {
		return publishTenantSender(sender, tenant)
	}
	if s := "publish/" + sender; inboxSender(s) {
		return s
	}
	sum := sha256.Sum256([]byte(sender))
	return "publish-sha256/" + hex.EncodeToString(sum[:])
}

// publishTenantSender is the space of a fan-out's keys: "publish-tenant/",
// the sender's length in bytes, ":", the sender, "/" and the tenant, where
// the Inbox can record that, or else "publish-tenant-sha256/" and the hex
// SHA-256 of the same. The length keeps every (sender, tenant) apart, a
// "/" in either included, and neither form is one a sender's own space
// takes ("publish/", "publish-sha256/"). A key recorded for a fan-out
// before keys were their tenant's stays in the sender's space, where the
// same request again still finds it (see recordPublish).
func publishTenantSender(sender, tenant string) string {
	named := strconv.Itoa(len(sender)) + ":" + sender + "/" + tenant
	if s := "publish-tenant/" + named; inboxSender(s) {
		return s
	}
	sum := sha256.Sum256([]byte(named))
	return "publish-tenant-sha256/" + hex.EncodeToString(sum[:])
}

// inboxSender reports whether the Inbox records s as a sender: at most
// maxInboxSender bytes of UTF-8 without NUL.
func inboxSender(s string) bool {
	return len(s) <= maxInboxSender && utf8.ValidString(s) && !strings.Contains(s, "\x00")
}

func (p *Publish) apply(ctx context.Context, tx *sqlx.Tx, req publishRequest, payload []byte, reporting reportkey.Payload) ([]string, error) {
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
			b, err := reporting.With(idempotencyKey)
			switch {
			case errors.Is(err, canonical.ErrNotFinite): // an integer a reporting receiver, reading numbers as doubles, would refuse
				return nil, &ack.ValidationError{Fields: []ack.FieldError{{Field: "payload", Rule: "finite"}}}
			case err == nil && len(b) > store.MaxPayloadSize:
				return nil, payloadTooLarge()
			}
			return b, err
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
