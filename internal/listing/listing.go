// Package listing is what the Admin reads of a store's endpoints and
// contract pins: a page at a time, from the database's indexes, and the
// few that most need an operator beside counts made in the database, so
// that an answer costs what it shows, however many endpoints the store
// keeps. Package store implements it and registers it here, so that its
// public surface stays what applications call; E and C are its
// EndpointHealth and Contract.
package listing

import (
	"context"
	"sync/atomic"
)

// Lists are a store's reads of its endpoints (E) and pins (C).
type Lists[E, C any] struct {
	// EndpointPage lists at most limit of the endpoints
	// store.Endpoints.List lists, those after the URL after ("" for the
	// first page) in the database's order of URLs; more reports whether
	// others follow.
	EndpointPage func(ctx context.Context, after string, limit int) (page []E, more bool, err error)
	// EndpointTop lists the limit endpoints that most need an operator,
	// most first, and counts them all: every one, and those in each
	// breaker state but closed.
	EndpointTop func(ctx context.Context, limit int) (top []E, count int, states map[string]int, err error)
	// EndpointStates counts, in the database, the endpoints in each
	// breaker state but closed, as EndpointTop does, without ranking any.
	EndpointStates func(ctx context.Context) (map[string]int, error)
	// ContractPage lists at most limit pins as EndpointPage lists
	// endpoints.
	ContractPage func(ctx context.Context, after string, limit int) (page []C, more bool, err error)
	// ContractTop lists the limit pins that most need an operator, most
	// first, and counts them all: every one, and those holding
	// deliveries back.
	ContractTop func(ctx context.Context, limit int) (top []C, count, holding int, err error)
}

var lists atomic.Pointer[func(s any) any]

// Register makes f the way to a store's Lists (package store does so).
func Register[E, C any](f func(s any) Lists[E, C]) {
	g := func(s any) any { return f(s) }
	lists.Store(&g)
}

// For returns the Lists of s, a *store.Store, whose endpoints are E and
// pins C.
func For[E, C any](s any) Lists[E, C] { return (*lists.Load())(s).(Lists[E, C]) }
