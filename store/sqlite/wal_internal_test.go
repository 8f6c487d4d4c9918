package sqlite

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAWALFileNeverSeenIsNotTakenForRemoved: the writer refuses writes
// once the -wal file it saw is removed or replaced, and only then: a
// -wal file it never saw (a database SQLite keeps out of WAL mode, which
// the DSN only asks for, has none) is no removal, or every writer of such
// a database would be refused after its first look.
func TestAWALFileNeverSeenIsNotTakenForRemoved(t *testing.T) {
	t.Parallel()
	w := &walBound{path: filepath.Join(t.TempDir(), "app.db-wal")}
	look := func() bool {
		fi, err := os.Stat(w.path)
		return w.gone(fi, err)
	}
	if look() {
		t.Fatal("no -wal file, never seen: taken for removed")
	}
	if err := os.WriteFile(w.path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if look() {
		t.Fatal("the -wal file seen first: taken for removed")
	}
	if err := os.Remove(w.path); err != nil {
		t.Fatal(err)
	}
	if !look() {
		t.Fatal("the -wal file seen, then removed: not taken for removed")
	}

	// Replaced: another file renamed over the one seen.
	w = &walBound{path: w.path}
	if err := os.WriteFile(w.path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if look() {
		t.Fatal("the -wal file seen first: taken for removed")
	}
	other := w.path + ".new"
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, w.path); err != nil {
		t.Fatal(err)
	}
	if !look() {
		t.Fatal("the -wal file seen, then replaced: not taken for removed")
	}
}
