package engine

import "context"

// Tx is a transaction the application holds through its engine's own
// client rather than database/sql: a pgx.Tx, which store/postgres wraps so
// that an application on pgxpool enqueues in its own transaction. The
// store runs its statements (Store.exec, query, scan: the one path every
// method takes) through Tx when the store.DBTX it is handed is also a Tx,
// and never calls the DBTX methods of such a value.
type Tx interface {
	// Exec runs a statement and returns how many rows it affected.
	Exec(ctx context.Context, sql string, args []any) (rowsAffected int64, err error)
	// Query runs a statement and returns its rows.
	Query(ctx context.Context, sql string, args []any) (Rows, error)
}

// Rows is a statement's result rows as the store reads them: what
// *sql.Rows has and sqlx's StructScan needs.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Columns() ([]string, error)
	Err() error
	Close() error
}
