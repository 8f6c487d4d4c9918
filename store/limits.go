package store

import (
	"context"
	"math"

	"github.com/courier-go/courier/internal/endpoint"
)

// Limits bound how hard courier's workers, all of them together, send to
// one endpoint. They are kept in the database and enforced by every claim
// there: on PostgreSQL across every worker process sharing it (a claim
// takes the endpoint's limits row for the rest of its transaction, so two
// claimers never both count the same free slot or token), on SQLite by
// its one writer. A claim that finds no room parks the endpoint's due
// deliveries out of the way of the others, and a later claim puts them
// back when there is room again. The zero Limits is no limit.
type Limits struct {
	// MaxInFlight is the most deliveries to the endpoint leased at once,
	// across every worker: each is counted from its claim until it is
	// settled, released or its lease expires, at most 100,000. 0 for no
	// limit (each worker's own client.Config.EndpointConcurrency still
	// applies). Defaults to 0.
	MaxInFlight int
	// Rate is how many requests per second may start, on average, as a
	// token bucket: each leased delivery takes a token (a breaker's
	// probe too, which waits for one like any delivery), and the bucket
	// refills at Rate up to Burst, within 0.000001..1000000. 0 for no
	// limit. Defaults to 0.
	Rate float64
	// Burst is the bucket's size: how many may start at once after a
	// quiet spell. A worker that finds the bucket empty claims again at
	// its next poll (client.Config.PollInterval) or wake-up, so a Burst
	// under Rate × PollInterval holds the rate below Rate. At most
	// 1,000,000. Defaults to
	// Rate rounded up, at least 1: one second's worth, which the default
	// one-second poll keeps up with.
	Burst int
}

// IsZero reports whether l limits nothing.
func (l Limits) isZero() bool { return l.MaxInFlight == 0 && l.Rate == 0 }

// withDefaults returns a copy of l with Burst at its default when a Rate
// is set without one.
func (l Limits) withDefaults() Limits {
	if l.Rate > 0 && l.Burst == 0 {
		l.Burst = max(1, int(math.Ceil(l.Rate)))
	}
	return l
}

func (l Limits) validate() error {
	faults := endpoint.LimitFaults(l.MaxInFlight, l.Rate, l.Burst)
	if len(faults) == 0 {
		return nil
	}
	switch f := faults[0]; {
	case f.Field == "max_in_flight":
		return invalidArgument("Limits.MaxInFlight must be within 0..100000")
	case f.Field == "rate":
		return invalidArgument("Limits.Rate must be 0 or within 0.000001..1000000 requests per second")
	case f.Rule == "excluded_without":
		return invalidArgument("Limits.Burst needs a Rate")
	default:
		return invalidArgument("Limits.Burst must be within 0..1000000")
	}
}

// SetLimits sets an endpoint's limits, taking effect at the next claim
// of every worker; the zero Limits removes them. A rate set where none
// was starts with a full bucket; set again, the bucket keeps the tokens
// it holds (up to the new Burst), so limits applied again, as each
// instance of an application may as it starts, never grant a second
// burst. A write the database refuses by a rule of its own (a trigger, a
// CHECK courier did not make) is CodeInvalidArgument: the row holds the
// limits given, and other limits may pass the rule.
func (e *Endpoints) SetLimits(ctx context.Context, endpoint string, l Limits) error {
	if !validEndpoint(endpoint) {
		return invalidEndpoint("SetLimits endpoint")
	}
	l = l.withDefaults()
	if err := l.validate(); err != nil {
		return err
	}
	// Each of the endpoint's spellings (see operate).
	names, err := e.s.spellings(ctx, endpoint)
	if err != nil {
		return err
	}
	for _, spelled := range names {
		var err error
		if l.isZero() {
			_, err = e.s.exec(ctx, e.s.writer, "endpoint_limits_delete", map[string]any{"endpoint": spelled})
		} else {
			_, err = e.s.exec(ctx, e.s.writer, "endpoint_limits_put", map[string]any{
				"endpoint": spelled, "max_in_flight": l.MaxInFlight, "rate": l.Rate, "burst": l.Burst,
				"tokens": float64(l.Burst), "now": e.s.now(),
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}
