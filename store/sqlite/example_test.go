package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// Open is the whole setup on SQLite: the file is created if needed,
// configured (WAL, a busy timeout, synchronous=FULL) and migrated.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
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

	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(filepath.Join(dir, "app.db"), store.DurabilityFull))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	for _, name := range files { // what a migration tool does, one file a transaction
		text, err := fs.ReadFile(sqlite.Migrations(), name)
		if err != nil {
			panic(err)
		}
		if _, err := db.ExecContext(ctx, string(text)); err != nil {
			panic(err)
		}
	}
	s, err := store.Open(ctx, db, store.Config{})
	fmt.Println("open:", err)
	if err == nil {
		defer s.Close()
	}
	// Output:
	// 001_init.sql true
	// open: <nil>
}

// A migration tool that hands its Go migrations a *sql.Tx (goose does)
// migrates courier's tables with the application's own, in one
// transaction: they commit or roll back together, and a second run is a
// no-op. Open then finds the schema it expects.
func ExampleMigrateTx() {
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	path := filepath.Join(dir, "app.db")

	db, err := sql.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull))
	if err != nil {
		panic(err)
	}
	migration := func(ctx context.Context, tx *sql.Tx) error { // the tool's Go migration
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)`); err != nil {
			return err
		}
		return sqlite.MigrateTx(ctx, tx)
	}
	for range 2 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		if err := migration(ctx, tx); err != nil {
			panic(err)
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
	}
	if err := db.Close(); err != nil {
		panic(err)
	}

	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	fmt.Println(s.Engine())
	// Output: sqlite
}
