package store

import (
	"log/slog"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logkey"
)

// EventKind says what an Event reports.
type EventKind string

// Event kinds.
const (
	EventEnqueued EventKind = "enqueued" // a new delivery was written
	EventClaimed  EventKind = "claimed"  // a claim leased N deliveries
	EventSettled  EventKind = "settled"  // N deliveries settled into Status: an attempt's outcome, or a claim ending them (expired, quarantined, suppressed)
	EventEndpoint EventKind = "endpoint" // an endpoint's breaker moved From a state To another (opened, probed, closed, disabled, enabled), for the reason in Code
)

// Event is a store event for metrics and alerts (Config.Hook). It carries
// counts, statuses, codes and, for EventEndpoint, the endpoint without its
// credentials; never content.
type Event struct {
	Kind   EventKind      // what happened
	N      int            // how many deliveries it concerns (an enqueue, one; a claim, those it leased); 0 for EventEndpoint
	Status courier.Status // the deliveries' status after it: pending, leased, or the one they settled into
	Code   courier.Code   // the settle's code (expired, quarantined's, ...), or the breaker's reason; "" if none
	// Endpoint, EndpointRef, From and To are an EventEndpoint's: the
	// endpoint, and the breaker states it moved between. Endpoint is its
	// scheme and host only ("/…" for a path), without userinfo, path or
	// query, which may hold credentials; EndpointRef is its opaque ref, as
	// the ops page and the CLI show it, which tells apart endpoints whose
	// Endpoint is alike (Endpoints.Resolve gives back the URL).
	Endpoint    string
	EndpointRef string
	From, To    EndpointState
}

// observe hands e to Config.Hook. What e reports has happened, committed
// or not the Store's to undo: a panic in the Hook is dropped, logged once
// at Error on slog's default logger without its value (which may hold
// anything), so that it never fails the call that made e nor ends the
// worker's goroutine and the process with it.
func (s *Store) observe(e Event) {
	if s.cfg.Hook == nil {
		return
	}
	defer func() {
		if recover() != nil {
			slog.Error("store: Hook panicked; the panic was dropped", slog.Bool(logkey.Panic, true),
				slog.String(logkey.Code, string(e.Code)))
		}
	}()
	s.cfg.Hook(e)
}

// emit reports an endpoint's breaker transition, made in tx (see
// observeIn).
func (s *Store) emit(tx DBTX, url string, from, to EndpointState, reason courier.Code) {
	if s.cfg.Hook == nil {
		return // no one hears it: the URL is neither redacted nor digested
	}
	s.observeIn(tx, Event{Kind: EventEndpoint, Endpoint: endpoint.Redact(url), EndpointRef: endpoint.Ref(url), From: from, To: to, Code: reason})
}

// observeIn reports e, made in tx: once tx commits, if it is a
// transaction of the Store's own (inTx, inOneTx), so that what is rolled
// back is never reported, nor what is made again after a rollback
// reported twice; at once in the caller's transaction, whose end the
// Store does not see.
func (s *Store) observeIn(tx DBTX, e Event) {
	if queued, ok := s.uncommitted.Load(tx); ok {
		*queued.(*[]Event) = append(*queued.(*[]Event), e)
		return
	}
	s.observe(e)
}
