package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/nilcheck"
)

// Subscriptions is the sender side's registry of who receives which
// events, where and how.
//
// A subscription's id is the registry's, not its tenant's: Get returns the
// subscription of any tenant, and Update and Delete refuse one whose
// Tenant is not the one given (CodeInvalidArgument) where a missing id is
// CodeNotFound.
// An application that lets tenants manage their own subscriptions checks
// that the one it was asked for is the caller's (Subscription.Tenant)
// before it shows or changes it, and answers alike for another tenant's
// and a missing one; List is by tenant.
//
// Tenants share what is the endpoint's, not the subscription's: the
// subscriptions of several tenants to one endpoint URL (in its normalized
// form, see Endpoints) are one endpoint to the outbox, with one breaker,
// one set of limits, one share of a worker and one set of ordering keys
// (see PublishParams.OrderingKey), so that one tenant's failing deliveries
// there open the breaker the other's wait behind. Give tenants endpoints
// of their own where that matters.
type Subscriptions struct{ s *Store }

// SubscriptionParams describes a subscription.
//
// Tenant and KeyID are 1-256 bytes of UTF-8 without NUL; EventTypes holds
// 1 to 256 types.
type SubscriptionParams struct {
	Tenant string // whose events
	// Endpoint is where they are delivered: an absolute http or https
	// URL whose port, if it names one, is 1 to 65535, and whose host is
	// ASCII without a trailing dot (see EnqueueParams.Endpoint). Create
	// refuses another port or host, and so does an Update that moves the
	// subscription; one that leaves it at its endpoint keeps the endpoint
	// as stored, whatever its port or host.
	Endpoint string
	// EventTypes are the event types it receives (see
	// PublishParams.EventType), each matched exactly, byte for byte: "*"
	// alone matches every type, while a type with a "*" in it
	// ("order.*") is no pattern but the type named so.
	EventTypes []string
	// KeyID names the signing configuration its deliveries are signed
	// with (see EnqueueParams.KeyID), never key material: the worker
	// signs each with what it configures for that name (the signer
	// client.Config.SignerFor returns for it; a worker with one
	// client.Config.Signer signs every delivery with that, whatever the
	// name, so name that key: "k1"). Required. Changing it suppresses the
	// deliveries already enqueued (see Subscriptions.Update): rotate keys
	// behind the name instead (see package signature, Rotating keys).
	KeyID string
	// Profile is the Ack profile, one of Config.Profiles; not terminal or
	// command, whose notification ids are derived from their payloads,
	// never a publish's. Defaults to ack.ProfileCourier.
	Profile string
	// Paused stops a subscription receiving events. Its zero value is a
	// subscription that receives: one created or updated without it gets
	// every matching event. While it is paused, Publish skips it, and a
	// delivery already enqueued for it that is claimed is suppressed
	// (subscription_changed) rather than sent; publishing the event
	// again once it is resumed sends it (see Outbox.Publish). Update
	// replaces every setting: to keep a subscription paused, an Update
	// repeats Paused: true.
	Paused bool
}

// Subscription is one registry entry. A delivery published to it is not
// sent under another endpoint, key or profile: once the subscription's
// endpoint, key or profile changes, or it is paused or stops taking the delivery's event type, the
// delivery's next claim suppresses it (subscription_changed).
type Subscription struct {
	ID int64
	SubscriptionParams
	CreatedAt time.Time
	UpdatedAt time.Time
	// fingerprint is the SHA-256 of what its deliveries depend on
	// (endpoint, key, profile, and the auth mode a subscription created
	// when subscriptions carried one keeps), which each delivery
	// published to it keeps and its claim compares.
	fingerprint string
}

// normalize defaults p and refuses what no publish could deliver.
func (sr *Subscriptions) normalize(p *SubscriptionParams) error {
	if p.Profile == "" {
		p.Profile = ack.ProfileCourier
	}
	p.Endpoint = normalEndpoint(p.Endpoint)
	switch {
	case !validTenant(p.Tenant):
		return invalidArgument("SubscriptionParams.Tenant must be 1-256 bytes of UTF-8 without NUL")
	case !validEndpoint(p.Endpoint):
		return invalidEndpoint("SubscriptionParams.Endpoint")
	case len(p.EventTypes) == 0:
		return invalidArgument("SubscriptionParams.EventTypes is empty")
	case len(p.EventTypes) > maxEventTypes:
		return invalidArgument("SubscriptionParams.EventTypes holds more than 256 types")
	case p.KeyID == "":
		return invalidArgument("SubscriptionParams.KeyID is required")
	case !validText(p.KeyID, maxName):
		return invalidArgument("SubscriptionParams.KeyID must be 1-256 bytes of UTF-8 without NUL")
	case p.Profile == ack.ProfileTerminal || p.Profile == ack.ProfileCommand:
		return invalidArgument("SubscriptionParams.Profile cannot be terminal or command: their notification ids come from their payloads")
	}
	if err := checkProfile(sr.s.cfg, "SubscriptionParams.Profile", p.Profile); err != nil {
		return err
	}
	for _, t := range p.EventTypes {
		if !validEventType(t) && t != "*" {
			return invalidArgument("SubscriptionParams.EventTypes holds an empty, spaced, overlong or non-UTF-8 type")
		}
	}
	return nil
}

// maxEventTypes bounds a subscription's EventTypes: the claim of each
// delivery published to it reads them.
const maxEventTypes = 256

// validTenant reports whether t can name a tenant: 1-256 bytes of text
// (see validText).
func validTenant(t string) bool { return validText(t, maxName) }

// validEventType reports whether t can name an event type: 1-256 bytes of
// text (see validText), no white space (the registry stores a
// subscription's types space-separated), and not "*", which stands for
// every type.
func validEventType(t string) bool {
	return validText(t, maxName) && t != "*" && !strings.ContainsFunc(t, unicode.IsSpace)
}

// fingerprint covers everything a delivery's sending depends on.
// authMode is the row's auth_mode column: a signing scheme's name that
// subscriptions once carried, kept in the fingerprint so that those
// fingerprinted with it keep their fingerprint, and "" for every other.
func (p SubscriptionParams) fingerprint(authMode string) string {
	h := sha256.New()
	for _, part := range []string{p.Endpoint, authMode, p.KeyID, p.Profile} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// args binds p for subscription_insert and subscription_update. authMode
// is the row's auth_mode (see fingerprint): "" for an insert, which
// writes "", and the stored one for an update, which keeps it.
func (p SubscriptionParams) args(authMode string, now int64) map[string]any {
	return map[string]any{
		"tenant": p.Tenant, "endpoint": p.Endpoint, "event_types": strings.Join(p.EventTypes, " "),
		"key_id": p.KeyID, "profile": p.Profile, "fingerprint": p.fingerprint(authMode),
		"active": !p.Paused, "now": now,
	}
}

// Create registers a subscription, inside tx when the caller has one. With
// a nil tx it writes on its own, through the Store's writer (see
// Store.Begin).
func (sr *Subscriptions) Create(ctx context.Context, tx DBTX, p SubscriptionParams) (Subscription, error) {
	if err := sr.normalize(&p); err != nil {
		return Subscription{}, err
	}
	if err := refuseNewEndpoint("SubscriptionParams.Endpoint", p.Endpoint); err != nil {
		return Subscription{}, err
	}
	return orOwnTx(ctx, sr.s, tx, func(tx DBTX) (Subscription, error) {
		var id int64
		if err := sr.s.scan(ctx, tx, "subscription_insert", p.args("", sr.s.now()), &id); err != nil {
			return Subscription{}, err
		}
		return sr.Get(ctx, tx, id)
	})
}

// Update replaces a subscription's settings. Changing the endpoint, key
// or profile changes its fingerprint: deliveries already enqueued for it
// are suppressed rather than sent. So are those whose event type its new
// EventTypes no longer include, and, while it is paused, every one its
// claim finds. An Update that changes none of these leaves its
// deliveries to be sent; an endpoint given as another spelling of the
// same URL (see EnqueueParams.Endpoint) is no change, and one stored
// under its spelling by a courier that did not normalize endpoints keeps
// it. Publishing an event again (Outbox.Publish)
// sends it under the subscription as it is then: its delivery is brought
// up to date if it is still unsent, sent again if it was suppressed so,
// and made anew for a new endpoint. Its tenant does not change: p.Tenant
// must be the one it has (CodeInvalidArgument otherwise); to serve
// another tenant, create a subscription under it. A write the database
// refuses by a rule of its own (a trigger, a CHECK courier did not make)
// is CodeInvalidArgument, as for Create: the row holds the settings given,
// Paused among them, and others may pass the rule. It runs inside tx when
// the caller has one; with a nil tx it writes on its own, through the
// Store's writer (see Store.Begin).
//
// Update writes every setting, whatever the row holds then: of two
// read-modify-writes at once (two operators editing one subscription),
// the later wins whole and the earlier's change is lost. Where that can
// happen, serialize the edits in the application: a lock of its own,
// held from the read (Get) to the Update.
func (sr *Subscriptions) Update(ctx context.Context, tx DBTX, id int64, p SubscriptionParams) (Subscription, error) {
	if err := sr.normalize(&p); err != nil {
		return Subscription{}, err
	}
	return orOwnTx(ctx, sr.s, tx, func(tx DBTX) (Subscription, error) {
		// The row's auth_mode is written once, at its insert, and never
		// changed: read here, it is the one the update keeps.
		r, err := getRow[subscriptionRow](ctx, sr.s, tx, "subscription_get", map[string]any{"id": id})
		if err != nil {
			return Subscription{}, err // CodeNotFound: there is none
		}
		if r.Tenant != p.Tenant {
			return Subscription{}, invalidArgument("Update cannot move a subscription to another Tenant")
		}
		if normalEndpoint(r.Endpoint) == p.Endpoint {
			// The same endpoint, stored under the spelling it was given
			// before endpoints were normalized, and fingerprinted with
			// it: kept, as auth_mode is, so that an Update that does not
			// change the endpoint does not change the fingerprint. Kept
			// whatever its port or host: one stored before they were
			// asked of a new endpoint stays where it is.
			p.Endpoint = r.Endpoint
		} else if err := refuseNewEndpoint("SubscriptionParams.Endpoint", p.Endpoint); err != nil {
			return Subscription{}, err // a move, to a port no dial reaches or a host spelled other than dialed
		}
		args := p.args(r.AuthMode, sr.s.now())
		args["id"] = id
		if _, err := sr.s.exec(ctx, tx, "subscription_update", args); err != nil {
			return Subscription{}, err
		}
		return sr.Get(ctx, tx, id)
	})
}

// Delete removes a subscription of tenant, inside tx when the caller has
// one; with a nil tx it writes on its own, through the Store's writer (see
// Store.Begin). Publish no longer fans events out to it, and a delivery
// already enqueued for it that its claim finds is suppressed
// (subscription_changed) rather than sent, as a paused subscription's is.
// Its deliveries keep their history (Outbox.Get, Outbox.Attempts) and
// their SubscriptionID, which no subscription created later is given: the
// registry never reuses an id. To stop a subscription for a while, pause
// it (SubscriptionParams.Paused) instead: an event published again once
// it is resumed is sent to it, where a deleted subscription's are not.
//
// A missing id is CodeNotFound; as with Update, one of another tenant is
// CodeInvalidArgument and stays.
func (sr *Subscriptions) Delete(ctx context.Context, tx DBTX, id int64, tenant string) error {
	if !validTenant(tenant) {
		return invalidArgument("Delete tenant must be 1-256 bytes of UTF-8 without NUL")
	}
	_, err := orOwnTx(ctx, sr.s, tx, func(tx DBTX) (struct{}, error) {
		res, err := sr.s.exec(ctx, tx, "subscription_delete", map[string]any{"id": id, "tenant": tenant})
		if err != nil {
			return struct{}{}, err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return struct{}{}, err
		}
		// None deleted: there is none (CodeNotFound), or it is another tenant's.
		if _, err := sr.Get(ctx, tx, id); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, invalidArgument("Delete cannot remove a subscription of another Tenant")
	})
	return err
}

// Get returns one subscription, or CodeNotFound. It reads inside tx when
// the caller has one; with a nil tx, through the Store's DB(), which sees
// only what is committed.
func (sr *Subscriptions) Get(ctx context.Context, tx DBTX, id int64) (Subscription, error) {
	if nilcheck.Nil(tx) {
		tx = sr.s.db
	}
	r, err := getRow[subscriptionRow](ctx, sr.s, tx, "subscription_get", map[string]any{"id": id})
	if err != nil {
		return Subscription{}, err
	}
	return r.subscription(), nil
}

// fingerprint returns subscription id's fingerprint as tx reads it now,
// or "" when there is none.
func (sr *Subscriptions) fingerprint(ctx context.Context, tx DBTX, id int64) (string, error) {
	st, err := getRow[subscriptionState](ctx, sr.s, tx, "subscription_state", map[string]any{"id": id})
	if courier.CodeOf(err) == courier.CodeNotFound {
		return "", nil
	}
	return st.Fingerprint, err
}

// List returns a tenant's subscriptions. A tenant no subscription could
// have (see SubscriptionParams.Tenant) is CodeInvalidArgument.
func (sr *Subscriptions) List(ctx context.Context, tenant string) ([]Subscription, error) {
	if !validTenant(tenant) {
		return nil, invalidArgument("List tenant must be 1-256 bytes of UTF-8 without NUL")
	}
	return sr.list(ctx, sr.s.db, "subscription_list", tenant)
}

func (sr *Subscriptions) list(ctx context.Context, x DBTX, name, tenant string) ([]Subscription, error) {
	var rows []subscriptionRow
	if err := sr.s.selectRows(ctx, x, name, map[string]any{"tenant": tenant}, &rows); err != nil {
		return nil, err
	}
	out := make([]Subscription, len(rows))
	for i, r := range rows {
		out[i] = r.subscription()
	}
	return out, nil
}

func (r subscriptionRow) subscription() Subscription {
	return Subscription{
		ID: r.ID,
		SubscriptionParams: SubscriptionParams{
			Tenant: r.Tenant, Endpoint: r.Endpoint, EventTypes: strings.Fields(r.EventTypes),
			KeyID: r.KeyID, Profile: r.Profile, Paused: !r.Active,
		},
		CreatedAt: fromMicros(r.CreatedAt), UpdatedAt: fromMicros(r.UpdatedAt), fingerprint: r.Fingerprint,
	}
}

// matches reports whether the subscription wants events of type t.
func (s Subscription) matches(t string) bool { return matchesType(s.EventTypes, t) }

// matchesType reports whether a subscription to types wants events of
// type t.
func matchesType(types []string, t string) bool {
	return slices.Contains(types, "*") || slices.Contains(types, t)
}
