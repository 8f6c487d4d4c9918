// Package damage damages SQLite database files, for tests of what courier
// does with a file SQLite finds damaged.
package damage

import (
	"os"
	"testing"

	"github.com/courier-go/courier/store"
)

// Tables closes s, a Store on the SQLite file at path, and gives the root
// page of each table named a page type no b-tree page has: SQLite then
// fails every statement that reads one of them with SQLITE_CORRUPT. The
// Store's Close checkpoints its WAL into the file first (it holds the
// last connection), so the damage is what the next Open reads.
func Tables(t testing.TB, s *store.Store, path string, tables ...string) {
	t.Helper()
	ctx := t.Context()
	var pageSize int64
	if err := s.DB().GetContext(ctx, &pageSize, "PRAGMA page_size"); err != nil {
		t.Fatal(err)
	}
	roots := make([]int64, len(tables))
	for i, table := range tables {
		if err := s.DB().GetContext(ctx, &roots[i], "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", table); err != nil {
			t.Fatalf("the root page of %s: %v", table, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, root := range roots {
		if _, err := f.WriteAt([]byte{0x00}, (root-1)*pageSize); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
