// Package scrape is what a metrics scrape reads of a store's endpoints
// (contrib/promcourier's gauges): counts made in the database and the few
// endpoints that have series of their own, so that a scrape costs what
// its series cost, however many endpoints the store keeps. Package store
// implements it and registers it here, so that its public surface stays
// what applications call.
package scrape

import (
	"context"
	"sync/atomic"
)

// Endpoint is an endpoint with series of its own.
type Endpoint struct {
	URL         string
	State       string // its breaker's state
	InFlight    int
	MaxInFlight int     // 0 for no limit
	Rate        float64 // 0 for no limit
	BlockedKeys int
}

// Endpoints is what one scrape shows of a store's endpoints.
type Endpoints struct {
	// States counts the endpoints in each breaker state but closed.
	States map[string]int
	// BlockedKeys counts the ordering keys a failed head holds, every
	// endpoint's.
	BlockedKeys int
	// Listed are the endpoints with series of their own (a breaker open
	// or half open, limits, deliveries in flight or blocked keys): the
	// first by URL, at most the limit asked for.
	Listed []Endpoint
}

// Reader reads a store's Endpoints, listing at most limit of them.
type Reader func(ctx context.Context, limit int) (Endpoints, error)

var read atomic.Pointer[func(s any) Reader]

// Register makes f the way to a store's Reader (package store does so).
func Register(f func(s any) Reader) { read.Store(&f) }

// For returns the Reader of s, a *store.Store.
func For(s any) Reader { return (*read.Load())(s) }
