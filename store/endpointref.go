package store

import (
	"context"

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
// is for operators' actions, not for a hot path.
func (e *Endpoints) Resolve(ctx context.Context, ref string) (string, error) {
	if !endpoint.IsRef(ref) {
		return "", invalidArgument("an endpoint reference is 32 lowercase hex characters")
	}
	for _, name := range []string{"endpoint_ref_known", "endpoint_ref_deliveries"} {
		url, err := e.resolveIn(ctx, name, ref)
		if err != nil || url != "" {
			return url, err
		}
	}
	return "", errNotFound
}

// resolveIn reads the endpoints query name lists and returns the one whose
// reference is ref, "" if none is.
func (e *Endpoints) resolveIn(ctx context.Context, name, ref string) (string, error) {
	var urls []string
	if err := e.s.selectRows(ctx, e.s.db, name, nil, &urls); err != nil {
		return "", err
	}
	for _, url := range urls {
		if endpoint.Ref(url) == ref {
			return url, nil
		}
	}
	return "", nil
}
