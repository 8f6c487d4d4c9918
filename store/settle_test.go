package store

import (
	"errors"
	"fmt"
	"testing"
)

// TestOnlyABusyStatementSplitsASettle: a settle whose statement waited
// for a lock past its bound (or lost a deadlock) is settled again one
// outcome per transaction; other failures of the database share its code
// (a lost connection, a database read-only after a failover) but settling
// again would not help them, and the batch fails as a whole.
func TestOnlyABusyStatementSplitsASettle(t *testing.T) {
	if !isBusy(fmt.Errorf("store: outbox_settle: %w: %w", errBusy, errors.New("lock timeout"))) {
		t.Error("a statement that failed busy does not split the settle")
	}
	for _, e := range []error{errUnavailable, errReadOnly, nil, errors.New("other")} {
		if isBusy(fmt.Errorf("store: outbox_settle: %w: %w", e, errors.New("conn reset"))) {
			t.Errorf("a statement that failed with %v splits the settle", e)
		}
	}
}
