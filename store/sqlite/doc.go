// Package sqlite is courier's SQLite engine: the embedded default, one
// database file on one host, through mattn/go-sqlite3 (cgo).
//
// Open is the whole setup: it opens (creating if needed) a database file
// configured the way courier needs it, migrates courier's tables and
// returns the Store:
//
//	s, err := sqlite.Open(ctx, "app.db", store.Config{})
//	defer s.Close()
//
// Importing the package also lets store.Open and store.Migrate work on a
// *sqlx.DB the application opened itself with the driver named DriverName
// (the same go-sqlite3 driver with commit hooks that wake workers in this
// process) or with go-sqlite3's own "sqlite3" driver (workers then find new
// rows by polling).
//
// SQLite has one writer at a time. The Store writes through a connection
// of its own (see store.Store.Begin), so the application's business
// transactions that go through Store.Begin queue with courier's writes in
// order, instead of in SQLite's sleeping busy handler.
package sqlite
