package store

import (
	"context"
	"maps"
	"time"

	"github.com/courier-go/courier/internal/pruning"
)

// defaultPruneBatch is PruneParams.BatchSize's default.
const defaultPruneBatch = 1000

// minInboxRetention is the least OlderThan Inbox.Prune takes. A Standard
// Webhooks or AdCP HMAC request carries no nonce: replayed while its
// timestamp is inside the verifier's tolerance (5 minutes either way by
// default), it is refused as a duplicate by its Inbox record alone, so the
// record must outlive twice the tolerance, and the difference between the
// store's clock and the verifier's. A day covers that for the longest
// tolerance a verifier takes (an hour), and is AdCP's least retention of
// dedupe records.
const minInboxRetention = 24 * time.Hour

// PruneParams bounds a retention pass.
type PruneParams struct {
	// OlderThan is the age past which records go: those last updated
	// before now minus OlderThan. It is the retention. It must not be
	// negative, and it has no default: the outbox's and the attempts
	// log's prunes refuse one under a microsecond, zero included, and the
	// inbox's one under 24 hours (CodeInvalidArgument), rather than delete
	// records however new. Keep an inbox's records longer than its senders
	// retry (a redelivery whose record is gone is processed again; see
	// Inbox.Prune for how long that is), and finished
	// deliveries as long as an enqueue may be retried (one whose delivery
	// is gone is enqueued anew: with other bytes than the first, it is no
	// collision at enqueue any more, and a receiver that still holds the
	// first's record refuses it 409, the delivery failing there). The replay cache's prune deletes pairs
	// past their own expiry and needs none.
	OlderThan time.Duration
	// BatchSize is the most rows one statement deletes, each statement its
	// own short transaction. Defaults to 1000 when 0; it must not be
	// negative.
	BatchSize int
	// MaxRows stops the pass after this many rows; 0 means until every
	// record past its age is gone. It must not be negative.
	MaxRows int
	// OnBatch, when not nil, is called after each statement with the rows
	// it deleted, for progress and metrics.
	OnBatch func(deleted int)
}

// A dry run of courier prune (package internal/pruning) runs the prunes
// themselves with count in place of prune: each delete statement's count
// reads, locking nothing, the rows it deletes, which a fragment of its SQL
// names for both.
func init() {
	pruning.Register(func(s any) pruning.Counts {
		st := s.(*Store)
		counting := func(prune func(context.Context, pruner, PruneParams) (int, error)) pruning.Count {
			return func(ctx context.Context, olderThan time.Duration) (int, error) {
				return prune(ctx, st.count, PruneParams{OlderThan: olderThan})
			}
		}
		return pruning.Counts{
			Outbox: counting(st.Outbox.prune), Attempts: counting(st.Outbox.pruneAttempts),
			Inbox: counting(st.Inbox.prune), Replay: counting(st.Replay.prune),
		}
	})
}

// pruner runs one prune statement, name, with args under p's bounds, and
// returns its rows: Store.prune deletes them, Store.count counts them.
type pruner func(ctx context.Context, name string, args map[string]any, p PruneParams) (int, error)

// pruneOlder runs a prune statement by run for records that go by age:
// those last updated before now minus p.OlderThan, which must be at least
// a microsecond. args are the statement's other parameters, if any.
func (s *Store) pruneOlder(ctx context.Context, run pruner, name string, args map[string]any, p PruneParams) (int, error) {
	if p.OlderThan < time.Microsecond { // records are stamped to the microsecond: less is none
		return 0, invalidArgument("PruneParams.OlderThan must be at least a microsecond: it is how long records are kept")
	}
	all := map[string]any{"before": s.now() - p.OlderThan.Microseconds()}
	maps.Copy(all, args)
	return run(ctx, name, all, p)
}

// check refuses p's negative bounds.
func (p PruneParams) check() error {
	switch {
	case p.OlderThan < 0:
		return invalidArgument("PruneParams.OlderThan must not be negative")
	case p.BatchSize < 0:
		return invalidArgument("PruneParams.BatchSize must not be negative")
	case p.MaxRows < 0:
		return invalidArgument("PruneParams.MaxRows must not be negative")
	}
	return nil
}

// count counts the rows the delete statement name would delete, in every
// batch prune would run of it, up to p.MaxRows, by the read name_count,
// which takes no lock and writes nothing: a dry run of prune. It is
// planned with its values (withValues): no one plan serves a count of an
// hour's rows and one of a year's. What is written between the count and
// a prune (a delivery finished, a record aged past p.OlderThan) makes the
// prune differ.
func (s *Store) count(ctx context.Context, name string, args map[string]any, p PruneParams) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	var n int
	err := s.withValues(ctx, name+"_count", func(tx DBTX) error { return s.scan(ctx, tx, name+"_count", args, &n) })
	if err != nil {
		return 0, err
	}
	if p.MaxRows > 0 {
		n = min(n, p.MaxRows)
	}
	return n, nil
}

// prune runs a bounded delete statement until it deletes less than a
// batch, each statement its own short transaction on the writer, so
// pruning never holds SQLite's write lock for long and runs safely from
// many instances at once.
func (s *Store) prune(ctx context.Context, name string, args map[string]any, p PruneParams) (int, error) {
	if err := p.check(); err != nil {
		return 0, err
	}
	if p.BatchSize == 0 {
		p.BatchSize = defaultPruneBatch
	}
	total := 0
	for p.MaxRows == 0 || total < p.MaxRows {
		limit := p.BatchSize
		if p.MaxRows > 0 {
			limit = min(limit, p.MaxRows-total)
		}
		args["limit"] = limit
		res, err := s.exec(ctx, s.writer, name, args)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, wrapf(err, name)
		}
		total += int(n)
		if p.OnBatch != nil {
			p.OnBatch(int(n))
		}
		if n < int64(limit) {
			break
		}
	}
	return total, nil
}
