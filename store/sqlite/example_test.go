package sqlite_test

import (
	"io/fs"

	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

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

// A team with its own migration tool applies courier's files in order,
// each once; store.Open then finds the schema it expects. (goose, Atlas
// or golang-migrate read the same fs.FS; a goose Go migration can call
// sqlite.MigrateTx with the *sql.Tx it is given instead.)
func ExampleMigrations() {
	files, err := fs.Glob(sqlite.Migrations(), "*.sql")
	if err != nil {
		panic(err)
	}
	fmt.Println(files[0], len(files) >= 8)

	dir, _ := os.MkdirTemp("", "courier-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(filepath.Join(dir, "app.db"), store.DurabilityFull))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	for _, name := range files { // what a migration tool does, one file a transaction
		text, _ := fs.ReadFile(sqlite.Migrations(), name)
		if _, err := db.ExecContext(ctx, string(text)); err != nil {
			panic(err)
		}
	}
	s, err := store.Open(ctx, db, store.Config{})
	fmt.Println("open:", err)
	if err == nil {
		s.Close()
	}
	// Output:
	// 001_init.sql true
	// open: <nil>
}
