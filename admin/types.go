package admin

import (
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
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
	ContractMismatches  int                    `json:"contract_mismatches"`
	// Operations counts command deliveries by operation, then status.
	Operations map[string]map[courier.Status]int `json:"operations"`
}

// deliveryJSON is one delivery. It never carries payload bytes (the detail
// has their digest, a page not even that), and its endpoint only
// redacted, with the ref to name it by.
type deliveryJSON struct {
	ID             int64          `json:"id"`
	NotificationID string         `json:"notification_id"`
	Endpoint       string         `json:"endpoint"`     // scheme and host only ("/…" for a path)
	EndpointRef    string         `json:"endpoint_ref"` // see the package doc
	PayloadSHA256  string         `json:"payload_sha256,omitempty"`
	Profile        string         `json:"profile"`
	KeyID          string         `json:"key_id,omitempty"`
	Status         courier.Status `json:"status"`
	Priority       int            `json:"priority"`
	Attempts       int            `json:"attempts"`
	MaxAttempts    int            `json:"max_attempts"`
	NextAttemptAt  time.Time      `json:"next_attempt_at,omitzero"`
	Deadline       time.Time      `json:"deadline,omitzero"`
	LeaseOwner     string         `json:"lease_owner,omitempty"`
	LeasedAt       time.Time      `json:"leased_at,omitzero"`
	LeaseExpiresAt time.Time      `json:"lease_expires_at,omitzero"`
	LastErrorCode  courier.Code   `json:"last_error_code,omitempty"`
	LastStatus     int            `json:"last_status,omitempty"`
	LastRemoteCode courier.Code   `json:"last_remote_code,omitempty"` // the receiver's own code, from its problem+json
	AckSHA256      string         `json:"ack_sha256,omitempty"`
	SubscriptionID int64          `json:"subscription_id,omitempty"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
}

// attemptJSON is one row of a delivery's attempts log.
type attemptJSON struct {
	Attempt        int                  `json:"attempt"`
	Owner          string               `json:"owner"`
	LeasedAt       time.Time            `json:"leased_at"`
	LeaseExpiresAt time.Time            `json:"lease_expires_at"`
	FinishedAt     time.Time            `json:"finished_at"`
	DurationMS     float64              `json:"duration_ms"`
	Outcome        store.AttemptOutcome `json:"outcome"`
	HTTPStatus     int                  `json:"http_status,omitempty"`
	ErrorCode      courier.Code         `json:"error_code,omitempty"`
	RemoteCode     courier.Code         `json:"remote_code,omitempty"` // the receiver's own code, from its problem+json
}

// deliveryDetailJSON is GET /api/deliveries/{id}.
type deliveryDetailJSON struct {
	Delivery deliveryJSON  `json:"delivery"`
	Attempts []attemptJSON `json:"attempts"`
}

// deliveryPageJSON is GET /api/deliveries: pass NextBefore as before for the
// next page; it is absent on the last.
type deliveryPageJSON struct {
	Deliveries []deliveryJSON `json:"deliveries"`
	NextBefore int64          `json:"next_before,omitempty"`
}

// redrivenJSON is how many deliveries a redrive moved back to pending.
type redrivenJSON struct {
	Redriven int `json:"redriven"`
}

// redriveRequestJSON is the body of POST /api/redrive: the ref of the endpoint
// whose failed (and quarantined payload_unreadable) deliveries to redrive,
// or none for every endpoint's.
type redriveRequestJSON struct {
	EndpointRef string `json:"endpoint_ref,omitempty"`
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

// limitsJSON is an endpoint's limits (store.Limits), and the body of POST
// /api/endpoints/{ref}/limits; zero members are no limit.
type limitsJSON struct {
	MaxInFlight int     `json:"max_in_flight"`
	Rate        float64 `json:"rate"`
	Burst       int     `json:"burst"`
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

func toHealth(h store.Health) healthJSON {
	return healthJSON{
		Status: h.Status, Code: h.Code, Counts: h.Counts, Due: h.Due, ExpiredLeases: h.ExpiredLeases,
		Failed: h.Failed, OldestDueAgeSeconds: h.OldestDueAge.Seconds(), ContractMismatches: h.ContractMismatches,
		Operations: h.Operations,
	}
}

func toContract(k store.Contract) contractJSON {
	return contractJSON{
		Ref: endpoint.Ref(k.Endpoint), Endpoint: endpoint.Redact(k.Endpoint), CapabilitiesSHA256: k.CapabilitiesSHA256,
		PinnedAt: utc(k.PinnedAt), Mismatched: k.Mismatched,
	}
}

func toDelivery(d store.Delivery) deliveryJSON {
	return deliveryJSON{
		ID: d.ID, NotificationID: d.NotificationID, Endpoint: endpoint.Redact(d.Endpoint), EndpointRef: endpoint.Ref(d.Endpoint),
		PayloadSHA256: d.PayloadSHA256, Profile: d.Profile, KeyID: d.KeyID, Status: d.Status, Priority: d.Priority,
		Attempts: d.Attempts, MaxAttempts: d.MaxAttempts, NextAttemptAt: utc(d.NextAttemptAt), Deadline: utc(d.Deadline),
		LeaseOwner: d.LeaseOwner, LeasedAt: utc(d.LeasedAt), LeaseExpiresAt: utc(d.LeaseExpiresAt),
		LastErrorCode: d.LastErrorCode, LastStatus: d.LastStatus, LastRemoteCode: d.LastRemoteCode, AckSHA256: d.AckSHA256,
		SubscriptionID: d.SubscriptionID, CreatedAt: utc(d.CreatedAt), UpdatedAt: utc(d.UpdatedAt),
	}
}

func toAttempt(at store.Attempt) attemptJSON {
	return attemptJSON{
		Attempt: at.Attempt, Owner: at.Owner, LeasedAt: utc(at.LeasedAt), LeaseExpiresAt: utc(at.LeaseExpiresAt),
		FinishedAt: utc(at.FinishedAt), DurationMS: float64(at.Duration.Microseconds()) / 1000,
		Outcome: at.Outcome, HTTPStatus: at.HTTPStatus, ErrorCode: at.ErrorCode, RemoteCode: at.RemoteCode,
	}
}

func toEndpoint(e store.EndpointHealth) endpointJSON {
	return endpointJSON{
		Ref: endpoint.Ref(e.Endpoint), Endpoint: endpoint.Redact(e.Endpoint), State: e.State,
		ConsecutiveFailures: e.ConsecutiveFailures, FailingSince: utc(e.FailingSince), OpenUntil: utc(e.OpenUntil),
		Reason: e.Reason, UpdatedAt: utc(e.UpdatedAt),
		Limits:   limitsJSON{MaxInFlight: e.Limits.MaxInFlight, Rate: e.Limits.Rate, Burst: e.Limits.Burst},
		InFlight: e.InFlight, BlockedKeys: e.BlockedKeys,
	}
}

// utc returns t in UTC; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
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

// eachOf is each with f fixed, for respond.
func eachOf[T, J any](f func(T) J) func([]T) []J {
	return func(xs []T) []J { return each(xs, f) }
}
