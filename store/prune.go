package store

import (
	"context"
	"time"
)

// PruneParams bounds a retention pass.
type PruneParams struct {
	OlderThan time.Duration     // records last updated before now minus this go
	BatchSize int               // rows per statement; defaults to 1000
	MaxRows   int               // stop after this many; 0 means until done
	OnBatch   func(deleted int) // called after each statement, for progress and metrics
}

// prune runs a bounded delete statement until it deletes less than a
// batch, each statement its own short transaction on the writer, so
// pruning never holds SQLite's write lock for long and runs safely from
// many instances at once.
func (s *Store) prune(ctx context.Context, name string, args map[string]any, p PruneParams) (int, error) {
	if p.BatchSize <= 0 {
		p.BatchSize = 1000
	}
	if p.OlderThan < 0 {
		return 0, invalidArgument("PruneParams.OlderThan must not be negative")
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
