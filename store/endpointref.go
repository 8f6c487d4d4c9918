package store

import (
	"context"
	"sync"

	"github.com/courier-go/courier/internal/endpoint"
)

// Resolve returns the endpoint URL whose reference is ref (the first 32
// hex characters of the SHA-256 of the URL as the store keeps it, its
// normalized form (see Endpoints); how operators' tools name an endpoint
// without its credentials), among the
// endpoints the store knows: those with a health record, a subscription or
// a pinned contract, then those of any delivery. It is CodeNotFound when no
// known endpoint has that reference, and invalid_argument when ref is not
// 32 lowercase hex characters.
//
// The small tables are searched first; only a reference they do not know
// reads the distinct endpoints of the outbox, which is a scan of it: this
// is for operators' actions, not for a hot path. Each search stops at the
// endpoint found. The Store remembers the last references it resolved
// (up to 1,024), so that a tool naming one endpoint again and again (a
// page of its deliveries after another) reads nothing more: a reference
// is a digest of its URL and names no other. So a reference resolved once
// still resolves, in this Store, once the store has forgotten its
// endpoint (its deliveries pruned, its records removed).
func (e *Endpoints) Resolve(ctx context.Context, ref string) (string, error) {
	if !endpoint.IsRef(ref) {
		return "", invalidArgument("an endpoint reference is 32 lowercase hex characters")
	}
	if e.s.closed.Load() { // as every call after Close, remembered or not
		return "", errClosed
	}
	if url, ok := e.resolved.get(ref); ok {
		return url, nil
	}
	for _, name := range []string{"endpoint_ref_known", "endpoint_ref_deliveries"} {
		url, err := e.resolveIn(ctx, name, ref)
		if err != nil {
			return "", err
		}
		if url != "" {
			e.resolved.put(ref, url)
			return url, nil
		}
	}
	return "", errNotFound
}

// resolveIn reads the endpoints query name lists until one has reference
// ref, and returns it, "" if none has.
func (e *Endpoints) resolveIn(ctx context.Context, name, ref string) (string, error) {
	rows, err := e.s.query(ctx, e.s.db, name, nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	for rows.Next() {
		var url string
		if err := rows.Scan(&url); err != nil {
			return "", e.s.dialect.interpret(name, err)
		}
		if endpoint.Ref(url) == ref {
			return url, nil
		}
	}
	return "", e.s.dialect.interpret(name, rows.Err())
}

// maxResolved is how many references a Store remembers (resolvedRefs).
const maxResolved = 1024

// resolvedRefs are the endpoints Resolve found, by reference. Full, it
// starts again empty: it stays bounded, and an operator's tool names a
// few endpoints at a time.
type resolvedRefs struct {
	mu   sync.Mutex
	urls map[string]string
}

func (r *resolvedRefs) get(ref string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	url, ok := r.urls[ref]
	return url, ok
}

func (r *resolvedRefs) put(ref, url string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.urls == nil || len(r.urls) >= maxResolved {
		r.urls = make(map[string]string)
	}
	r.urls[ref] = url
}

// invalidEndpoint refuses an endpoint that is not one a worker can send
// to (endpoint.Valid), naming what held it.
func invalidEndpoint(what string) error {
	return invalidArgument(what + " must be " + endpoint.Rule)
}

// refuseNewEndpoint refuses raw, an endpoint entering the store (an enqueue, a
// subscription created or moved), when its port is one no dial can reach
// (endpoint.Dialable), or its host is another spelling of the one dialed
// (endpoint.HostAsDialed), which would make one receiver two endpoints,
// naming what held it and never the URL. One that is not valid at all is
// left to invalidEndpoint's refusal. An endpoint the store already holds
// is named by its URL whatever its port or host: a database written
// before they were asked may hold one.
func refuseNewEndpoint(what, raw string) error {
	switch {
	case !validEndpoint(raw):
	case !endpoint.Dialable(raw):
		return invalidArgument(what + " must be " + endpoint.PortRule)
	case !endpoint.HostAsDialed(raw):
		return invalidArgument(what + " must be " + endpoint.HostRule)
	}
	return nil
}
