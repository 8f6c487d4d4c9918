package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// Open is the whole setup on SQLite: the file is created if needed,
// configured (WAL, a busy timeout, synchronous=FULL) and migrated.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "courier-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	fmt.Println(s.Engine())
	// Output: sqlite
}
