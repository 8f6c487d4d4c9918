package sqlite_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestCheckReportsARowItCannotReadAndWalksOn: SQLite keeps whatever a
// column is given, so raw SQL can leave a row Go cannot read into its
// types (a priority of 'high'; the table has no CHECK on it). Check is
// the tool meant to find such rows: it reports it by its id, with the
// rows it finds invalid otherwise, and its next call goes on past it. A
// Check failed on it every time instead, its cursor never moving, so
// nothing after it was ever validated.
func TestCheckReportsARowItCannotReadAndWalksOn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "courier.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var ids []int64
	for i := range 6 {
		ids = append(ids, enqueueOne(t, s, fmt.Sprintf("n-%d", i)).ID)
	}
	for _, edit := range []struct {
		sql string
		id  int64
	}{
		{"UPDATE courier_outbox SET priority = 'high' WHERE id = ?", ids[1]},       // unreadable
		{"UPDATE courier_outbox_payload SET payload = X'00' WHERE id = ?", ids[4]}, // its digest no longer matches
		{"UPDATE courier_outbox SET deadline = 'later' WHERE id = ?", ids[5]},      // unreadable, the last row
	} {
		if _, err := s.DB().ExecContext(ctx, edit.sql, edit.id); err != nil {
			t.Fatal(err)
		}
	}
	// Three Checks of two rows walk the outbox once; a fourth starts over.
	for round, want := range [][]int64{{ids[1]}, {}, {ids[4], ids[5]}, {ids[1]}} {
		h, err := s.Outbox.Check(ctx, 2)
		if err != nil {
			t.Fatalf("Check %d: %v", round+1, err)
		}
		blocked := h.Status == store.HealthBlocked && h.Code == courier.CodeIntegrity
		if h.Checked != 2 || !slices.Equal(h.Invalid, want) || blocked != (len(want) > 0) {
			t.Fatalf("Check %d = %s/%s, checked %d, invalid %v; want 2 checked, invalid %v", round+1, h.Status, h.Code, h.Checked, h.Invalid, want)
		}
	}
}
