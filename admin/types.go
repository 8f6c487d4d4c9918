package admin

import (
	"encoding/json"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/opsjson"
	"github.com/courier-go/courier/store"
)

// healthJSON is the outbox's health (GET /api/health).
type healthJSON struct {
	Status              store.HealthStatus     `json:"status"` // "ok" or "blocked"
	Code                courier.Code           `json:"code,omitempty"`
	Counts              map[courier.Status]int `json:"counts"`
	Due                 int                    `json:"due"`
	ExpiredLeases       int                    `json:"expired_leases"`
	Failed              int                    `json:"failed"`
	OldestDueAgeSeconds float64                `json:"oldest_due_age_seconds"`
	Overdue             int                    `json:"overdue"`
	ContractMismatches  int                    `json:"contract_mismatches"`
	// Operations counts command deliveries by operation, then status.
	Operations map[string]map[courier.Status]int `json:"operations"`
	// Endpoints counts the endpoints in each breaker state but closed
	// (open, half_open, disabled), zero included: a receiver that is down
	// blocks nothing, and shows here.
	Endpoints map[store.EndpointState]int `json:"endpoints"`
}

// deliveryPageJSON is GET /api/deliveries: pass NextBefore as before for the
// next page; it is absent on the last.
type deliveryPageJSON struct {
	Deliveries []opsjson.Delivery `json:"deliveries"`
	NextBefore int64              `json:"next_before,omitempty"`
}

// endpointPageJSON is GET /api/endpoints, a page by URL: pass NextAfter,
// the last one's ref, as after for the next page; it is absent on the
// last.
type endpointPageJSON struct {
	Endpoints []endpointJSON `json:"endpoints"`
	NextAfter string         `json:"next_after,omitempty"`
}

// blockedKeysJSON is GET /api/endpoints/{ref}/blocked-keys.
type blockedKeysJSON struct {
	BlockedKeys []blockedKeyJSON `json:"blocked_keys"`
}

// blockedKeyJSON is an ordering key a failed delivery holds (store.BlockedKey).
type blockedKeyJSON struct {
	Head        int64     `json:"head"` // the failed delivery holding the key
	OrderingKey string    `json:"ordering_key"`
	Since       time.Time `json:"since"`
}

// contractPageJSON is GET /api/contracts, paged as endpointPageJSON.
type contractPageJSON struct {
	Contracts []contractJSON `json:"contracts"`
	NextAfter string         `json:"next_after,omitempty"`
}

// redrivenJSON is how many deliveries a redrive moved back to pending.
type redrivenJSON struct {
	Redriven int `json:"redriven"`
}

// cancelledJSON is how many deliveries a cancel of an endpoint's
// deliveries cancelled.
type cancelledJSON struct {
	Cancelled int `json:"cancelled"`
}

// cancelRequestJSON is the body of POST /api/cancel: the ref of the
// endpoint whose deliveries to cancel. It is required: there is no cancel
// of every endpoint's deliveries, and a member left out, null or "" is
// refused alike.
type cancelRequestJSON struct {
	EndpointRef json.RawMessage `json:"endpoint_ref,omitempty"`
}

// redriveRequestJSON is the body of POST /api/redrive: the ref of the endpoint
// whose failed (and quarantined payload_unreadable) deliveries to redrive,
// or none for every endpoint's. EndpointRef is kept raw so that a member
// left out (every endpoint's) is told from one that is present but null
// or "", which is refused: an unset variable in a caller's script must
// not widen a redrive to the whole outbox.
type redriveRequestJSON struct {
	EndpointRef json.RawMessage `json:"endpoint_ref,omitempty"`
}

// endpointJSON is an endpoint's breaker state, limits and load, its URL
// redacted.
type endpointJSON struct {
	Ref                 string              `json:"ref"`      // see the package doc
	Endpoint            string              `json:"endpoint"` // scheme and host only ("/…" for a path)
	State               store.EndpointState `json:"state"`    // closed, open, half_open or disabled
	ConsecutiveFailures int                 `json:"consecutive_failures"`
	FailingSince        time.Time           `json:"failing_since,omitzero"`
	OpenUntil           time.Time           `json:"open_until,omitzero"`
	Reason              courier.Code        `json:"reason,omitempty"`
	UpdatedAt           time.Time           `json:"updated_at,omitzero"`
	Limits              limitsJSON          `json:"limits"`
	InFlight            int                 `json:"in_flight"`
	BlockedKeys         int                 `json:"blocked_keys"`
}

// limitsJSON is an endpoint's limits (store.Limits); zero members are no
// limit.
type limitsJSON struct {
	MaxInFlight int     `json:"max_in_flight"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
}

// limitsRequestJSON is the body of POST /api/endpoints/{ref}/limits: the
// endpoint's limits, within store.Limits' bounds. It replaces them all,
// so max_in_flight and rate are required, 0 for no limit: a body that
// left one out, meant to change the other alone, would remove it. Burst
// may be left out (or 0) for its default, Rate rounded up, and needs a
// Rate.
type limitsRequestJSON struct {
	MaxInFlight *int     `json:"max_in_flight" validate:"required"`
	Rate        *float64 `json:"rate" validate:"required"`
	Burst       int      `json:"burst"`
}

// Check refuses, naming the field, what store.Limits refuses: a value
// outside its bounds (rule min or max), and a Burst without a Rate (rule
// excluded_without).
func (l limitsRequestJSON) Check() error {
	var fields []ack.FieldError
	for _, f := range endpoint.LimitFaults(*l.MaxInFlight, *l.Rate, l.Burst) {
		fields = append(fields, ack.FieldError{Field: f.Field, Rule: f.Rule})
	}
	if fields != nil {
		return &ack.ValidationError{Fields: fields}
	}
	return nil
}

// limits is the store.Limits l asks for.
func (l limitsRequestJSON) limits() store.Limits {
	return store.Limits{MaxInFlight: *l.MaxInFlight, Rate: *l.Rate, Burst: l.Burst}
}

// contractJSON is an endpoint's contract pin, its URL redacted.
type contractJSON struct {
	Ref                string    `json:"ref"`      // see the package doc
	Endpoint           string    `json:"endpoint"` // scheme and host only ("/…" for a path)
	CapabilitiesSHA256 string    `json:"capabilities_sha256"`
	PinnedAt           time.Time `json:"pinned_at"`
	Mismatched         int       `json:"mismatched"` // unfinished deliveries under another digest
}

// pinRequestJSON is the body of POST /api/contracts/{ref}/pin.
type pinRequestJSON struct {
	CapabilitiesSHA256 string `json:"capabilities_sha256"`
}

// failedJSON is how many deliveries fail-mismatched failed.
type failedJSON struct {
	Failed int `json:"failed"`
}

// The conversions below are the only way a store row reaches a page or an
// answer: each endpoint URL passes through endpoint.Redact and
// endpoint.Ref here, and nowhere else.

// toHealth is h's JSON form, with the endpoints in each breaker state
// but closed (opsjson.NotClosed), as listing's EndpointStates counts them.
func toHealth(h store.Health, states map[string]int) healthJSON {
	j := healthJSON{
		Status: h.Status, Code: h.Code, Counts: h.Counts, Due: h.Due, ExpiredLeases: h.ExpiredLeases,
		Failed: h.Failed, OldestDueAgeSeconds: h.OldestDueAge.Seconds(), Overdue: h.Overdue, ContractMismatches: h.ContractMismatches,
		Operations: h.Operations, Endpoints: make(map[store.EndpointState]int),
	}
	for _, st := range opsjson.NotClosed() {
		j.Endpoints[st] = states[string(st)]
	}
	return j
}

func toContract(k store.Contract) contractJSON {
	return contractJSON{
		Ref: endpoint.Ref(k.Endpoint), Endpoint: endpoint.Redact(k.Endpoint), CapabilitiesSHA256: k.CapabilitiesSHA256,
		PinnedAt: opsjson.UTC(k.PinnedAt), Mismatched: k.Mismatched,
	}
}

func toEndpoint(e store.EndpointHealth) endpointJSON {
	return endpointJSON{
		Ref: endpoint.Ref(e.Endpoint), Endpoint: endpoint.Redact(e.Endpoint), State: e.State,
		ConsecutiveFailures: e.ConsecutiveFailures, FailingSince: opsjson.UTC(e.FailingSince), OpenUntil: opsjson.UTC(e.OpenUntil),
		Reason: e.Reason, UpdatedAt: opsjson.UTC(e.UpdatedAt),
		Limits:   limitsJSON{MaxInFlight: e.Limits.MaxInFlight, Rate: e.Limits.Rate, Burst: e.Limits.Burst},
		InFlight: e.InFlight, BlockedKeys: e.BlockedKeys,
	}
}

// each maps every element of xs to its JSON form with f; never nil, so an
// empty list is [] on the wire.
func each[T, J any](xs []T, f func(T) J) []J {
	out := make([]J, 0, len(xs))
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}
