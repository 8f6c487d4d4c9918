package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/reportkey"
	"github.com/courier-go/courier/internal/wire"
)

// MaxEventIDSize bounds PublishParams.EventID (and the publish API's
// event_id): each delivery's notification id, EventID ":" the
// subscription id, is a token of at most 256 characters, and a
// subscription id takes up to 19 digits.
const MaxEventIDSize = 256 - len(":9223372036854775807")

// PublishParams is one event to fan out.
type PublishParams struct {
	// Tenant selects whose subscriptions receive the event: 1-256 bytes
	// of UTF-8 without NUL, as SubscriptionParams.Tenant.
	Tenant string
	// EventType selects the subscriptions (SubscriptionParams.EventTypes)
	// and is recorded with each delivery: a subscription whose types no
	// longer include it by the time the delivery is claimed is not sent
	// it. An EventID published again as another type is
	// CodeIdempotencyCollision. 1-256 bytes of UTF-8 without NUL, no
	// white space, not "*".
	EventType string
	// EventID identifies the event; each delivery's notification id is
	// EventID + ":" + the subscription id. A token of 1 to
	// MaxEventIDSize (236) of A-Z a-z 0-9 _ . : -, so that the
	// notification id is one too. Subscription ids are the Store's own,
	// counted from 1: Stores that sign as one sender to one receiver
	// need EventIDs no two of them share (EnqueueParams.NotificationID
	// says why).
	EventID string
	// Payload is what each subscription receives, unless Build is set:
	// as EnqueueParams.Payload, 1 byte to MaxPayloadSize (refused whether
	// or not a subscription matches), and over 1 MiB only for receivers
	// configured to read it.
	//
	// The same bytes go to every subscription (but those of the
	// reporting profile, below), under a notification id of each one's
	// own, which a scheme that signs a message id
	// (Standard Webhooks' webhook-id) signs: a courier receiver whose
	// payload type takes its DedupeKey from the payload refuses a payload
	// that names another id, 400 validation_failed (rule webhook_id), and
	// the delivery fails. One Payload suits a type whose DedupeKey is ""
	// (deduped by the signed id); for one that carries its id, Build
	// writes each subscription's, EventID + ":" + s.ID.
	//
	// A subscription of the reporting profile (ack.ProfileReporting) is
	// sent the Payload with its idempotency_key set to the delivery's own
	// (Published.IdempotencyKey; one the Payload has is replaced), in
	// canonical JSON (ack.Canonical): an AdCP receiver (handler.Reporting)
	// checks no signed id and dedupes by that key alone, so one key for
	// every subscription would be one notification to a buyer whose
	// endpoints share an Inbox, its function run for the first to arrive
	// only. Its Payload must be a JSON object, at most MaxPayloadSize
	// with that key set, without an integer no float64 holds (which
	// canonical JSON keeps exactly, and a reporting receiver, reading
	// every number as a double, refuses), or the publish is refused
	// (invalid_argument) before anything is written. Each such subscription holds a copy.
	Payload []byte
	// Build makes a subscription's payload. idempotencyKey is the
	// delivery's own, in ack.NewIdempotencyKey's form, derived from its
	// notification id and endpoint: a receiver that dedupes by it (AdCP)
	// sees the same key, in the same bytes, on every retry, and a publish
	// again of the same event builds the same bytes, so it finds its
	// deliveries (Existed) where a fresh key would have collided. It is
	// given each subscription as it is now: what it builds must be the
	// same bytes again, unless the subscription's Profile changed since,
	// when a delivery brought up to date or sent again (see Publish)
	// takes the bytes built for the new profile. What it builds is held
	// to EnqueueParams.Payload's rules, its size too: a payload over
	// MaxPayloadSize is refused (invalid_argument), and one over 1 MiB is
	// for receivers configured to read it. Every payload is built before
	// the first is written (a Build that fails writes nothing), so Publish
	// holds them all until it returns: the matching subscriptions times
	// the payload's size, 32 MiB for 32 subscriptions of 1 MiB payloads
	// (BenchmarkPublishBuiltPayloads), 4 GiB for 1000 subscriptions of
	// MaxPayloadSize payloads. One payload for all (Payload) is held
	// once, however many match, and a copy more for each subscription of
	// the reporting profile.
	Build func(s Subscription, idempotencyKey string) ([]byte, error)
	// Priority, Deadline and OrderingKey apply to every delivery (see
	// EnqueueParams), and are refused outside their bounds whether or
	// not a subscription matches: with an OrderingKey (the entity the
	// event is about), each subscription's endpoint receives the key's
	// events in publish order. The key is the endpoint's, not the
	// tenant's: another tenant's subscription to the same endpoint whose
	// events carry the same key waits on it too (behind a failed delivery
	// of the key, as Config.OrderingOnFailure says), so qualify a key by
	// its tenant ("acme:order-42") where tenants may share an endpoint.
	// Published again once its Deadline has
	// passed, an event finds the deliveries written in time and leaves
	// out a subscription that matches since (its delivery would start
	// after the Deadline); one that finds none is CodeInvalidArgument.
	Priority    int
	Deadline    time.Time
	OrderingKey string
}

// Published is one delivery a publish made.
type Published struct {
	Enqueued
	NotificationID string // EventID ":" SubscriptionID
	SubscriptionID int64  // the subscription the delivery is for
	IdempotencyKey string // the delivery's own, as Build was given it, or a reporting subscription's Payload carries it (ack.NewIdempotencyKey's form)
}

// Publish fans an event out, inside the caller's transaction, to one
// delivery per subscription of the tenant that matches its type and is
// not paused, as one snapshot of the registry. A rolled-back publish makes none. On
// error nothing is known to be written: the caller rolls back (a Build
// that fails writes nothing, as every payload is built first).
//
// Publishing an event again (a retry, or after its subscriptions
// changed) delivers it to each matching subscription as it is now: one
// created since gets a new delivery, and so does one whose Endpoint
// changed (the endpoint is part of a delivery's identity). A delivery
// that exists is compared with what the caller chose, its EventType (an
// event is of one type), its payload (Payload, or what Build makes, unless
// the subscription's Profile changed since), Priority and OrderingKey:
// another value is CodeIdempotencyCollision, as for Enqueue (and so is a
// delivery, a succeeded one too, sealed under a key Config.Encryption no
// longer holds, or holds over other bytes). What the subscription decides
// is not compared (its KeyID and Profile, Config.MaxAttempts): a change
// there never makes a publish fail, after the Deadline too. By the
// delivery's state:
//
//   - unfinished (pending, retrying, or leased by a worker) under the
//     subscription's settings of before (Subscriptions.Update changed
//     its KeyID or Profile, so its claim would suppress it): it is
//     brought up to date in place, to be sent under the subscription as
//     it is now, on its schedule and budget. An attempt in flight is
//     not recalled: it finishes under the settings it was claimed with,
//     and if it does not succeed the next attempt uses the new ones.
//   - suppressed with code subscription_changed (its subscription had
//     changed, was paused or no longer wanted the event's type when it
//     was claimed): the subscriber never got it, so it is sent again under
//     the subscription as it is now, with a fresh budget (Config.MaxAttempts
//     more attempts) and horizon (Deadline, or Config.RetryHorizon from
//     now). Its notification id and IdempotencyKey are
//     the same, so a receiver that did get an earlier attempt dedupes it.
//   - anything else (succeeded, failed, cancelled, quarantined, or
//     unfinished under the subscription's current settings): found as it
//     is.
//
// Existed is false for a delivery the call wrote: new, brought up to
// date or sent again. On PostgreSQL a Subscriptions.Update that commits
// while a publish's transaction runs may leave the publish's delivery
// under the settings it read; its claim suppresses it, as if the Update
// had come after the publish, and publishing the event again sends it.
// Such a publish never brings back what it read: a delivery it would
// bring up to date or send again, under a subscription whose settings
// changed since it read them, it finds as it is (Existed), as another
// publish, after the Update, may have written it under the new ones.
func (o *Outbox) Publish(ctx context.Context, tx DBTX, p PublishParams) ([]Published, error) {
	return inOneTx(ctx, o.s, tx, func(tx DBTX) ([]Published, error) { return o.publish(ctx, tx, p) })
}

func (o *Outbox) publish(ctx context.Context, tx DBTX, p PublishParams) ([]Published, error) {
	switch {
	case p.Build == nil && len(p.Payload) == 0:
		return nil, invalidArgument("PublishParams needs a Payload or a Build")
	case p.Build == nil && len(p.Payload) > MaxPayloadSize:
		return nil, invalidArgument("PublishParams.Payload must be at most 4 MiB")
	case !validTenant(p.Tenant):
		return nil, invalidArgument("PublishParams.Tenant must be 1-256 bytes of UTF-8 without NUL")
	case !validEventType(p.EventType):
		return nil, invalidArgument("PublishParams.EventType must be 1-256 bytes of UTF-8 without NUL or white space, not *")
	case !wire.IsToken(p.EventID) || len(p.EventID) > MaxEventIDSize:
		return nil, invalidArgument(fmt.Sprintf("PublishParams.EventID must be 1-%d of A-Z a-z 0-9 _ . : -", MaxEventIDSize))
	case p.OrderingKey != "" && !wire.IsVisible(p.OrderingKey, maxOrderingKey):
		// refused whether or not a subscription matches, as the others are
		return nil, invalidArgument("PublishParams.OrderingKey must be 1-256 bytes of visible ASCII, without spaces")
	case p.Priority < math.MinInt32 || p.Priority > math.MaxInt32:
		return nil, invalidArgument("PublishParams.Priority must be within -2147483648..2147483647")
	case !p.Deadline.IsZero() && p.Deadline.UnixMicro()-o.s.now() > MaxHorizon.Microseconds():
		// One that has passed is judged per delivery: a publish again
		// finds those written in time (see EnqueueParams.Deadline).
		return nil, invalidArgument("PublishParams.Deadline must be at most MaxHorizon (30 days) ahead")
	}
	// Every payload is built before anything is written: a Build that
	// fails leaves nothing behind, even in a transaction its caller
	// commits.
	fan, err := o.fanOut(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	// The deliveries are written in key order (inKeyOrder: by endpoint,
	// the ordering key being the event's), each joining its key at once: a
	// delivery published again takes its key's row before its own (see
	// republished), so a publish takes the keys of its new deliveries and
	// of those it sends again in one order, as every transaction that
	// waits for keys does. In subscription order, or with the new ones
	// joined after the others, two such transactions could each wait for
	// a key the other holds.
	order := make([]int, len(fan))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(fan[a].sub.Endpoint, fan[b].sub.Endpoint) })
	out := make([]Published, len(fan))
	late := make([]bool, len(fan))
	for _, i := range order {
		f := fan[i]
		s := f.sub
		e, err := o.enqueue(ctx, tx, EnqueueParams{
			NotificationID: f.id, Endpoint: s.Endpoint, Payload: f.payload,
			Profile: s.Profile, KeyID: s.KeyID, Priority: p.Priority, Deadline: p.Deadline, OrderingKey: p.OrderingKey,
		}, f.ref)
		if isLate(err) {
			late[i] = true // a subscription made since the publish in time, or none was
			continue
		}
		if courier.CodeOf(err) == courier.CodeInvalidArgument {
			// What the enqueue refuses here is the subscription's: the
			// payload its profile cannot carry (what Build made for it,
			// which the caller never saw), or a profile the Store no
			// longer knows. The caller's own fields were checked above.
			if p.Build != nil {
				return nil, fmt.Errorf("store: publish to subscription %d, whose payload Build made: %w", s.ID, err)
			}
			return nil, fmt.Errorf("store: publish to subscription %d: %w", s.ID, err)
		}
		if err != nil {
			return nil, err
		}
		out[i] = Published{Enqueued: e, NotificationID: f.id, SubscriptionID: s.ID, IdempotencyKey: f.key}
	}
	if !slices.Contains(late, true) {
		return out, nil
	}
	if !slices.Contains(late, false) {
		return nil, errLate // no delivery was written in time: no publish was
	}
	// A publish again after the Deadline found what it wrote in time; a
	// subscription that matches since would get a delivery that starts
	// after it, and is left out.
	kept := out[:0]
	for i, pub := range out {
		if !late[i] {
			kept = append(kept, pub)
		}
	}
	return kept, nil
}

// fanned is the delivery a publish makes for one subscription, before it
// is written.
type fanned struct {
	sub     Subscription // its Endpoint as enqueue stores it
	id, key string       // notification id and idempotency key
	payload []byte
	ref     subscriptionRef
}

// fanOut makes the deliveries of p for the tenant's subscriptions that
// match its event type, in subscription order, each with its payload
// built: by p.Build, or, for a subscription of the reporting profile,
// p.Payload with the delivery's idempotency_key set.
func (o *Outbox) fanOut(ctx context.Context, tx DBTX, p PublishParams) ([]fanned, error) {
	subs, err := o.s.Subscriptions.list(ctx, tx, "subscription_matching", p.Tenant)
	if err != nil {
		return nil, err
	}
	var fan []fanned
	reporting := reportingPayload{payload: p.Payload}
	for _, s := range subs {
		if !s.matches(p.EventType) {
			continue
		}
		id := fmt.Sprintf("%s:%d", p.EventID, s.ID)
		// As enqueue stores it, and orders its key by it.
		if s.Endpoint, err = o.s.storedAs(ctx, tx, s.Endpoint, id, p.OrderingKey); err != nil {
			return nil, err
		}
		f := fanned{sub: s, id: id, payload: p.Payload, ref: subscriptionRef{id: s.ID, fingerprint: s.fingerprint, eventType: p.EventType, built: p.Build != nil}}
		f.key = publishKey(f.id, s.Endpoint)
		switch {
		case p.Build != nil:
			if f.payload, err = p.Build(s, f.key); err != nil {
				return nil, fmt.Errorf("store: build payload for subscription %d: %w", s.ID, err)
			}
		case s.Profile == ack.ProfileReporting:
			if f.payload, err = reporting.with(f.key); err != nil {
				return nil, fmt.Errorf("store: publish to subscription %d, of the reporting profile: %w", s.ID, err)
			}
			f.ref.built, f.ref.given = true, p.Payload
		}
		fan = append(fan, f)
	}
	return fan, nil
}

// publishKey is the idempotency key of the delivery (notificationID,
// endpoint) a publish makes: "whk_" and 32 base32 characters, as
// ack.NewIdempotencyKey writes them, of the first 160 bits of a SHA-256
// over the delivery's identity. It names the delivery, the same on every
// publish of the event; the receiver dedupes by it per verified sender, so
// it needs to be unique, not secret.
func publishKey(notificationID, endpoint string) string {
	h := sha256.New()
	h.Write([]byte("courier.publish.idempotency-key.v1\x00"))
	writePrefixed(h, notificationID, endpoint)
	var bits [20]byte
	copy(bits[:], h.Sum(nil))
	return wire.IdempotencyKey(bits)
}

// reportingPayload is a publish's Payload as its subscriptions of the
// reporting profile are sent it: read once, at the first of them, and
// then copied for each with its idempotency_key set (see
// PublishParams.Payload).
type reportingPayload struct {
	payload []byte
	read    bool
	keyed   reportkey.Payload
	err     error
}

// with returns the Payload, in canonical JSON, with its idempotency_key
// set to key; an error of code invalid_argument if it is not a JSON
// object, holds an integer no float64 holds, or if the key takes it past
// MaxPayloadSize (refused here, with
// every other payload made, before anything is written).
func (r *reportingPayload) with(key string) ([]byte, error) {
	if !r.read {
		r.read = true
		canonical, err := ack.Canonical(r.payload)
		if err == nil && canonical[0] != '{' {
			err = errors.New("not an object")
		}
		if err != nil {
			r.err = invalidArgument(fmt.Sprintf("PublishParams.Payload must be a JSON object, an AdCP envelope: %v", err))
		} else {
			r.keyed = reportkey.Read(canonical)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	b, err := r.keyed.With(key)
	if errors.Is(err, canonical.ErrNotFinite) {
		return nil, invalidArgument("PublishParams.Payload holds an integer no float64 holds, which a reporting receiver refuses (it reads every number as a double)")
	}
	if err == nil && len(b) > MaxPayloadSize {
		return nil, invalidArgument("PublishParams.Payload, canonical with its idempotency_key set, must be at most 4 MiB")
	}
	return b, err
}
