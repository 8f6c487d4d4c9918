package store

import "github.com/courier-go/courier"

// EventKind says what an Event reports.
type EventKind string

// Event kinds.
const (
	EventEnqueued EventKind = "enqueued" // a new delivery was written
	EventClaimed  EventKind = "claimed"  // a claim leased N deliveries
	EventSettled  EventKind = "settled"  // N deliveries settled into Status: an attempt's outcome, or a claim ending them expired
)

// Event is a store event for metrics (Config.Hook). It carries counts,
// statuses and codes, never content.
type Event struct {
	Kind   EventKind
	N      int
	Status courier.Status
	Code   courier.Code
}

// EndpointEvent reports a breaker transition (Config.OnEndpoint).
type EndpointEvent struct {
	Endpoint string
	From, To EndpointState
	Reason   courier.Code
}

func (s *Store) observe(e Event) {
	if s.cfg.Hook != nil {
		s.cfg.Hook(e)
	}
}

// emit hands an endpoint event to Config.OnEndpoint.
func (s *Store) emit(ev EndpointEvent) {
	if s.cfg.OnEndpoint != nil {
		s.cfg.OnEndpoint(ev)
	}
}
