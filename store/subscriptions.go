package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/courier-go/courier"
)

// Subscriptions is the sender side's registry of who receives which
// events, where and how.
type Subscriptions struct{ s *Store }

// SubscriptionParams describes a subscription.
type SubscriptionParams struct {
	Tenant     string   // whose events
	Endpoint   string   // where they are delivered
	EventTypes []string // which event types; "*" matches all
	AuthMode   string   // the signing scheme (signature.Scheme* names)
	KeyID      string   // the signing key's reference, never key material
	Profile    string   // the Ack profile; defaults to DefaultProfile
	Active     bool
}

// Subscription is one registry entry. Fingerprint is the SHA-256 of what
// its deliveries depend on (endpoint, auth mode, key, profile): a delivery
// enqueued under one fingerprint is not sent under another.
type Subscription struct {
	ID int64
	SubscriptionParams
	Fingerprint string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func (p *SubscriptionParams) normalize() error {
	if p.Profile == "" {
		p.Profile = DefaultProfile
	}
	switch {
	case p.Tenant == "" || len(p.Tenant) > 256:
		return invalidArgument("SubscriptionParams.Tenant must be 1-256 bytes")
	case p.Endpoint == "" || len(p.Endpoint) > MaxEndpointSize:
		return invalidArgument("SubscriptionParams.Endpoint must be 1-2048 bytes")
	case len(p.EventTypes) == 0:
		return invalidArgument("SubscriptionParams.EventTypes is empty")
	case p.AuthMode == "" || p.KeyID == "":
		return invalidArgument("SubscriptionParams.AuthMode and KeyID are required")
	}
	for _, t := range p.EventTypes {
		if t == "" || strings.ContainsAny(t, " \t\n") {
			return invalidArgument("SubscriptionParams.EventTypes holds an empty or spaced type")
		}
	}
	return nil
}

// fingerprint covers everything a delivery's sending depends on.
func (p SubscriptionParams) fingerprint() string {
	h := sha256.New()
	for _, part := range []string{p.Endpoint, p.AuthMode, p.KeyID, p.Profile} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (p SubscriptionParams) args(now int64) map[string]any {
	return map[string]any{
		"tenant": p.Tenant, "endpoint": p.Endpoint, "event_types": strings.Join(p.EventTypes, " "),
		"auth_mode": p.AuthMode, "key_id": p.KeyID, "profile": p.Profile, "fingerprint": p.fingerprint(),
		"active": p.Active, "now": now,
	}
}

// Create registers a subscription, inside tx when the caller has one.
func (sr *Subscriptions) Create(ctx context.Context, tx DBTX, p SubscriptionParams) (Subscription, error) {
	if err := p.normalize(); err != nil {
		return Subscription{}, err
	}
	q := sr.s.q("subscription_insert")
	var id int64
	if err := tx.QueryRowContext(ctx, q.text, q.args(p.args(sr.s.now()))...).Scan(&id); err != nil {
		return Subscription{}, sr.s.dialect.interpret(q.name, err)
	}
	return sr.Get(ctx, tx, id)
}

// Update replaces a subscription's settings. Changing the endpoint, auth
// mode, key or profile changes its fingerprint: deliveries already
// enqueued for it are suppressed rather than sent.
func (sr *Subscriptions) Update(ctx context.Context, tx DBTX, id int64, p SubscriptionParams) (Subscription, error) {
	if err := p.normalize(); err != nil {
		return Subscription{}, err
	}
	args := p.args(sr.s.now())
	args["id"] = id
	res, err := sr.s.exec(ctx, tx, "subscription_update", args)
	if err != nil {
		return Subscription{}, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Subscription{}, courier.ErrNotFound
	}
	return sr.Get(ctx, tx, id)
}

// Get returns one subscription, or ErrNotFound.
func (sr *Subscriptions) Get(ctx context.Context, tx DBTX, id int64) (Subscription, error) {
	rows, err := sr.s.query(ctx, tx, "subscription_get", map[string]any{"id": id})
	if err != nil {
		return Subscription{}, err
	}
	subs, err := sr.scan(rows)
	if err != nil {
		return Subscription{}, err
	}
	if len(subs) == 0 {
		return Subscription{}, courier.ErrNotFound
	}
	return subs[0], nil
}

// List returns a tenant's subscriptions.
func (sr *Subscriptions) List(ctx context.Context, tenant string) ([]Subscription, error) {
	rows, err := sr.s.query(ctx, sr.s.db, "subscription_list", map[string]any{"tenant": tenant})
	if err != nil {
		return nil, err
	}
	return sr.scan(rows)
}

func (sr *Subscriptions) scan(rows *sql.Rows) ([]Subscription, error) {
	defer rows.Close()
	var out []Subscription
	for rows.Next() {
		var s Subscription
		var types string
		var created, updated int64
		if err := rows.Scan(&s.ID, &s.Tenant, &s.Endpoint, &types, &s.AuthMode, &s.KeyID, &s.Profile, &s.Fingerprint, &s.Active, &created, &updated); err != nil {
			return nil, sr.s.dialect.interpret("subscriptions", err)
		}
		s.EventTypes = strings.Fields(types)
		s.CreatedAt, s.UpdatedAt = fromMicros(created), fromMicros(updated)
		out = append(out, s)
	}
	return out, sr.s.dialect.interpret("subscriptions", rows.Err())
}

// matches reports whether the subscription wants events of type t.
func (s Subscription) matches(t string) bool {
	return slices.Contains(s.EventTypes, "*") || slices.Contains(s.EventTypes, t)
}

// PublishParams is one event to fan out.
type PublishParams struct {
	Tenant    string
	EventType string
	// EventID identifies the event; each delivery's notification id is
	// EventID + ":" + the subscription id.
	EventID string
	// Payload is what each subscription receives, unless Build is set.
	Payload []byte
	// Build makes a subscription's payload. idempotencyKey is random and
	// fresh per delivery: a receiver that dedupes by it (AdCP) sees the
	// same key, in the same bytes, on every retry.
	Build func(s Subscription, idempotencyKey string) ([]byte, error)
	// Priority and Deadline apply to every delivery (see EnqueueParams).
	Priority int
	Deadline time.Time
}

// Published is one delivery a publish made.
type Published struct {
	Enqueued
	NotificationID string
	SubscriptionID int64
	IdempotencyKey string
}

// Publish fans an event out, inside the caller's transaction, to one
// delivery per active subscription of the tenant that matches its type,
// as one snapshot of the registry. A rolled-back publish makes none.
func (o *Outbox) Publish(ctx context.Context, tx DBTX, p PublishParams) ([]Published, error) {
	if p.Build == nil && len(p.Payload) == 0 {
		return nil, invalidArgument("PublishParams needs a Payload or a Build")
	}
	sr := o.s.Subscriptions
	rows, err := o.s.query(ctx, tx, "subscription_matching", map[string]any{"tenant": p.Tenant})
	if err != nil {
		return nil, err
	}
	subs, err := sr.scan(rows)
	if err != nil {
		return nil, err
	}
	var out []Published
	for _, s := range subs {
		if !s.matches(p.EventType) {
			continue
		}
		key := NewIdempotencyKey()
		payload := p.Payload
		if p.Build != nil {
			if payload, err = p.Build(s, key); err != nil {
				return nil, fmt.Errorf("store: build payload for subscription %d: %w", s.ID, err)
			}
		}
		id := fmt.Sprintf("%s:%d", p.EventID, s.ID)
		e, err := o.enqueue(ctx, tx, EnqueueParams{
			NotificationID: id, Endpoint: s.Endpoint, Payload: payload,
			Profile: s.Profile, KeyID: s.KeyID, Priority: p.Priority, Deadline: p.Deadline,
		}, s.ID, s.Fingerprint)
		if err != nil {
			return nil, err
		}
		out = append(out, Published{Enqueued: e, NotificationID: id, SubscriptionID: s.ID, IdempotencyKey: key})
	}
	return out, nil
}

// NewIdempotencyKey returns a random key for a receiver that dedupes by
// one: "whk_" and 32 hex digits.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "whk_" + hex.EncodeToString(b[:])
}
