// Package opsjson is the JSON form in which operators' tools show a
// delivery and its attempts: the admin API and the courier CLI print the
// same document. It never holds payload bytes, and an endpoint only
// redacted (scheme and host), with its ref to name it by; times are in
// UTC. It holds what else those tools share: whether the store knows an
// endpoint an operator typed (KnownEndpoint), the breaker states they
// count (NotClosed), and the cancel of every delivery of an endpoint gone
// for good (CancelEndpoint).
package opsjson

import (
	"context"
	"errors"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
)

// Delivery is one delivery. It never carries payload bytes (a detail
// has their digest, the admin API's pages not even that), and its
// endpoint only redacted, with the ref to name it by.
type Delivery struct {
	ID             int64          `json:"id"`
	NotificationID string         `json:"notification_id"`
	Endpoint       string         `json:"endpoint"`     // scheme and host only ("/…" for a path)
	EndpointRef    string         `json:"endpoint_ref"` // the first 32 hex characters of the SHA-256 of the URL
	PayloadSHA256  string         `json:"payload_sha256,omitempty"`
	PayloadKeyID   string         `json:"payload_key_id,omitempty"` // the id (never the bytes) of the key that sealed the payload
	Profile        string         `json:"profile"`
	KeyID          string         `json:"key_id,omitempty"`
	Status         courier.Status `json:"status"`
	Priority       int            `json:"priority"`
	Attempts       int            `json:"attempts"`
	MaxAttempts    int            `json:"max_attempts"`
	NextAttemptAt  time.Time      `json:"next_attempt_at,omitzero"` // while pending or retry_wait only
	Deadline       time.Time      `json:"deadline,omitzero"`
	LeaseOwner     string         `json:"lease_owner,omitempty"`
	LeasedAt       time.Time      `json:"leased_at,omitzero"`
	LeaseExpiresAt time.Time      `json:"lease_expires_at,omitzero"`
	LastErrorCode  courier.Code   `json:"last_error_code,omitempty"`
	LastStatus     int            `json:"last_status,omitempty"`
	LastRemoteCode courier.Code   `json:"last_remote_code,omitempty"` // the receiver's own code, from its problem+json
	AckSHA256      string         `json:"ack_sha256,omitempty"`
	SubscriptionID int64          `json:"subscription_id,omitempty"`
	OrderingKey    string         `json:"ordering_key,omitempty"` // the key it is sent in order of, "" for none
	// Held says why a pending or retrying delivery is not sent although
	// it may be due: "key" (an earlier delivery of its ordering key is
	// unfinished, or failed and holds the key) or "endpoint" (its endpoint
	// had no room); left out when it is not held.
	Held      store.Hold `json:"held,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// Attempt is one row of a delivery's attempts log.
type Attempt struct {
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

// DeliveryDetail is a delivery and its attempts log: the admin API's
// GET /api/deliveries/{id}, and courier deliveries show.
type DeliveryDetail struct {
	Delivery Delivery  `json:"delivery"`
	Attempts []Attempt `json:"attempts"`
}

// NewDelivery is d's JSON form: its endpoint redacted and named by its
// ref, its payload left out, its times in UTC.
func NewDelivery(d store.Delivery) Delivery {
	next := time.Time{} // the stored time of a delivery not waiting is when it last moved, not an attempt to come
	if d.Status == courier.StatusPending || d.Status == courier.StatusRetryWait {
		next = UTC(d.NextAttemptAt)
	}
	return Delivery{
		ID: d.ID, NotificationID: d.NotificationID, Endpoint: endpoint.Redact(d.Endpoint), EndpointRef: endpoint.Ref(d.Endpoint),
		PayloadSHA256: d.PayloadSHA256, PayloadKeyID: d.PayloadKeyID, Profile: d.Profile, KeyID: d.KeyID, Status: d.Status, Priority: d.Priority,
		Attempts: d.Attempts, MaxAttempts: d.MaxAttempts, NextAttemptAt: next, Deadline: UTC(d.Deadline),
		LeaseOwner: d.LeaseOwner, LeasedAt: UTC(d.LeasedAt), LeaseExpiresAt: UTC(d.LeaseExpiresAt),
		LastErrorCode: d.LastErrorCode, LastStatus: d.LastHTTPStatus, LastRemoteCode: d.LastRemoteCode, AckSHA256: d.AckSHA256,
		SubscriptionID: d.SubscriptionID, OrderingKey: d.OrderingKey, Held: d.Held, CreatedAt: UTC(d.CreatedAt), UpdatedAt: UTC(d.UpdatedAt),
	}
}

// NewAttempt is at's JSON form, its times in UTC and its duration in
// milliseconds.
func NewAttempt(at store.Attempt) Attempt {
	return Attempt{
		Attempt: at.Attempt, Owner: at.Owner, LeasedAt: UTC(at.LeasedAt), LeaseExpiresAt: UTC(at.LeaseExpiresAt),
		FinishedAt: UTC(at.FinishedAt), DurationMS: float64(at.Duration.Microseconds()) / 1000,
		Outcome: at.Outcome, HTTPStatus: at.HTTPStatus, ErrorCode: at.ErrorCode, RemoteCode: at.RemoteCode,
	}
}

// UTC returns t in UTC; the zero time stays zero.
func UTC(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// NewDeliveryDetail is d with its attempts.
func NewDeliveryDetail(d store.Delivery, attempts []store.Attempt) DeliveryDetail {
	out := DeliveryDetail{Delivery: NewDelivery(d), Attempts: make([]Attempt, 0, len(attempts))}
	for _, at := range attempts {
		out.Attempts = append(out.Attempts, NewAttempt(at))
	}
	return out
}

// NotClosed returns the breaker states operators' tools count an
// endpoint by, closed (healthy, the default) aside: open, half open and
// disabled, in that order.
func NotClosed() []store.EndpointState {
	return []store.EndpointState{store.EndpointOpen, store.EndpointHalfOpen, store.EndpointDisabled}
}

// KnownEndpoint reports whether the store knows the endpoint an operator
// typed, by the URL as typed or as the store keeps it (kept, which it
// returns): by its deliveries, its breaker record, its limits, a
// subscription or a contract pin. A typed URL it does not know is most
// likely misspelt.
func KnownEndpoint(ctx context.Context, s *store.Store, typed string) (kept string, known bool, err error) {
	h, err := s.Endpoints.Get(ctx, typed)
	if err != nil {
		return "", false, err
	}
	known, err = Known(ctx, s, typed, h.Endpoint)
	return h.Endpoint, known, err
}

// Known is KnownEndpoint for a caller that has read the endpoint already:
// kept is the store.EndpointHealth.Endpoint that Endpoints.Get returned
// for typed.
func Known(ctx context.Context, s *store.Store, typed, kept string) (bool, error) {
	urls := []string{kept}
	if typed != kept {
		urls = append(urls, typed) // as typed too: a ref names the URL as it was stored
	}
	for _, url := range urls {
		_, err := s.Endpoints.Resolve(ctx, endpoint.Ref(url))
		switch {
		case err == nil:
			return true, nil
		case !errors.Is(err, courier.CodeNotFound):
			return false, err
		}
	}
	return false, nil
}
