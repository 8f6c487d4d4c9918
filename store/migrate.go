package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/retry"
	"github.com/courier-go/courier/store/internal/engine"
)

// Migrate brings db's courier tables to the version this courier knows,
// applying the pending numbered migrations in one transaction. Running it
// again is a no-op, and so is running it on a newer courier's schema that
// this one may run on; on one it must not run on it is CodeSchemaTooNew
// (see Upgrades in the package documentation). A no-op creates nothing, so
// an application's role granted courier's tables but not the right to
// change their schema may call it at start, while a deploy step of its own
// migrates (see package store/postgres, under Roles and privileges).
//
// The transaction keeps the locks its migrations take until it commits. On
// PostgreSQL a migration that alters courier_outbox (adds a column or a
// constraint) locks the table ACCESS EXCLUSIVE: until Migrate commits,
// every enqueue (and with it the application's transaction that enqueues),
// claim, settle and read of the outbox waits, and the migration reads the
// whole table while it holds the lock (to check its new constraints and
// build its indexes), so the wait grows with the outbox. Prune before
// upgrading a large outbox. Migrate queues for such a lock, behind the
// transactions already running, at most a second at a time (or the
// connection's own lock_timeout, where it sets one): then it rolls back,
// so the transactions queued behind it go on, and tries again after a
// pause, 30 tries in all, before it fails with CodeDatabaseUnavailable.
// On SQLite the migration holds the database's write lock, as every write
// does, and other writers wait for it up to their busy timeout.
// Migrate reads the version first, in a read-only transaction: with
// nothing to apply it takes no lock, so on SQLite (through a pool of
// sqlite.DriverName) it returns at once while another process holds the
// write lock (a long transaction, a bulk load), rather than wait for it
// the busy timeout and fail. Only with something to apply does it take
// the lock, and look again under it: another process may have migrated
// meanwhile.
//
// Courier's tables go where the connection creates tables: on PostgreSQL,
// the first schema of its search_path (see package store/postgres).
// Migrate refuses with CodeConfigInvalid to create them there while a
// later schema of the search_path holds them (tables that landed in
// public before a schema of their own was put first): new, empty tables
// would hide the old ones, and their pending deliveries, from every query.
// It refuses alike, naming the schema, as Open does, while no schema of
// the search_path holds them and another schema of the database does (a
// URL or a role that lost its search_path, a role without USAGE on
// courier's schema): new, empty tables would take every enqueue made with
// that search_path, out of reach of the workers of the old ones. A second
// application's courier beside another's begins with its version table
// in a schema of its own (see package store/postgres, under Two couriers
// in one database).
// Teams that run their own migration tool apply the engine's files instead
// (sqlite.Migrations, postgres.Migrations), or migrate courier's tables in
// a transaction of their own, with their own tables, by calling the
// engine's MigrateTx (sqlite.MigrateTx, postgres.MigrateTx) from one of
// its migrations; a *sqlx.Tx passes its *sql.Tx, tx.Tx.
func Migrate(ctx context.Context, db *sqlx.DB) error {
	d, err := dialectOfDB(db)
	if err != nil {
		return err
	}
	// An engine that bounds Migrate's lock waits (schema_lock_wait) has it
	// try again; elsewhere the connection's own wait (SQLite's busy
	// timeout) is the bound.
	tries := 1
	if d.query("schema_lock_wait").text != "" {
		tries = migrateTries
	}
	pause := migratePause
	for try := 1; ; try++ {
		err := migrateOnce(ctx, db, d)
		if err == nil || !isBusy(err) || try >= tries || ctx.Err() != nil {
			return err
		}
		if !retry.Sleep(ctx, pause) {
			return err
		}
		pause = min(2*pause, maxMigratePause)
	}
}

// How Migrate tries again when a lock it needs is held past the engine's
// bound (schema_lock_wait): up to migrateTries times, pausing first
// migratePause, doubling up to maxMigratePause, each jittered between half
// and all of it, so that the transactions it stepped aside for end.
const (
	migrateTries    = 30
	migratePause    = 100 * time.Millisecond
	maxMigratePause = 5 * time.Second
)

// migrateOnce is one try of Migrate: a look at the schema that takes no
// write lock (pending) and, only when there is something to do, a
// transaction of its own, which looks again under the lock: another
// process may have migrated meanwhile.
func migrateOnce(ctx context.Context, db *sqlx.DB, d *dialect) error {
	if todo, err := pending(ctx, db, d); err != nil || !todo {
		return err
	}
	tx, err := beginMigrate(ctx, db, d, nil)
	if err != nil {
		return err
	}
	if err := migrateTx(ctx, tx, db.DriverName()); err != nil {
		_ = tx.Rollback()
		return err
	}
	return d.interpret("migrate", tx.Commit())
}

// beginMigrate begins a transaction of Migrate's, with opts, set as the
// engine says (schema_isolation, schema_lock_wait).
func beginMigrate(ctx context.Context, db *sqlx.DB, d *dialect, opts *sql.TxOptions) (*sqlx.Tx, error) {
	tx, err := db.BeginTxx(ctx, opts)
	if err != nil {
		return nil, d.interpret("migrate", err)
	}
	for _, name := range []string{"schema_isolation", "schema_lock_wait"} {
		if q := d.query(name); q.text != "" {
			if _, err := tx.ExecContext(ctx, q.text); err != nil {
				_ = tx.Rollback()
				return nil, d.interpret("migrate", err)
			}
		}
	}
	return tx, nil
}

// pending reports whether Migrate has anything to do on db, looking in a
// read-only transaction: on SQLite every other transaction begins
// IMMEDIATE, taking the one writer, which another process may hold (a
// running application's long transaction, a bulk load) past the busy
// timeout, while a read-only one through a pool of the engine's driver
// begins deferred and waits for no writer. (go-sqlite3's own driver
// begins every transaction as its DSN's _txlock says.) A current schema,
// or a newer courier's this one may run on, has nothing to do; a newer
// one it must not run on is CodeSchemaTooNew, as under the lock. Whatever
// else the look finds (no version table, tables where Migrate would not
// create them, a version behind) is left to the transaction that takes
// the lock, which looks again and answers.
func pending(ctx context.Context, db *sqlx.DB, d *dialect) (bool, error) {
	tx, err := beginMigrate(ctx, db, d, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	// On PostgreSQL the version read below is the first courier_schema
	// of the search_path, which may be a later schema's: only with the
	// table in the first schema, where Migrate creates it, is the
	// version its own.
	found, err := searchSchemas(ctx, tx, d)
	if err != nil {
		return false, d.interpret("migrate", err)
	}
	if found.searched && !found.present {
		return true, nil
	}
	var have int
	if err := tx.QueryRowContext(ctx, d.query("schema_version").text).Scan(&have); err != nil {
		if d.Interpret(err).Kind == engine.Missing {
			return true, nil
		}
		return false, d.interpret("migrate", err)
	}
	switch {
	case have < len(d.migrations):
		return true, nil
	case have > len(d.migrations):
		return false, runsOnNewer(d, tx.QueryRowContext(ctx, d.query("schema_required").text))
	}
	return false, nil
}

// refuseToHide refuses a migration that would create courier's tables in
// the first schema of the search_path while a later one holds them: the
// new, empty tables would hide the old ones, and their pending deliveries,
// from every query (PostgreSQL; see the engine's schema_search).
func refuseToHide(found schemaSearch) error {
	if found.elsewhere == "" {
		return nil
	}
	return &coded.Error{Code: courier.CodeConfigInvalid, Msg: fmt.Sprintf(
		"store: courier's tables are in schema %q, after the first schema of the search_path, which has none: "+
			"Migrate would create new, empty tables there that hide them; move them, or put %q first", found.elsewhere, found.elsewhere)}
}

// refuseUnreached refuses a migration while courier's tables are where
// the search_path does not lead, and none where it does: a URL or a role
// that lost its search_path, or a schema it names that the role may not
// use (no USAGE), which PostgreSQL skips. The new, empty tables Migrate
// would create in the first schema of the search_path would take the
// enqueues of every connection with that search_path, and no worker of
// the old ones would ever send them (PostgreSQL; see the engine's
// schema_search). The error is Open's (unreached), as config_invalid.
func refuseUnreached(found schemaSearch) error {
	return notReached(found, true)
}

// unusable returns an error of code, ending with what to do, for the first
// schema of found that the search_path names but the role may not use (no
// USAGE), so that PostgreSQL skips it; nil when there is none.
func unusable(found []unreachedSchema, code courier.Code, todo string) error {
	for _, f := range found {
		if f.inPath && !f.usable {
			return &coded.Error{Code: code, Msg: fmt.Sprintf(
				"store: the search_path (%s) names schema %q, which holds courier's tables, but this role may not use it "+
					"(no USAGE on the schema), so PostgreSQL skips it: %s", f.searchPath, f.schema, todo)}
		}
	}
	return nil
}

// schemaSearch is what the engine's schema_search found of courier's
// version table, from where the search_path leads and beyond.
type schemaSearch struct {
	searched bool // the engine looks (PostgreSQL); elsewhere nothing is known
	// present: the first schema of the search_path, where Migrate
	// creates courier's tables, has it.
	present bool
	// elsewhere is a later schema of the search_path that has it, while
	// the first has no relation of its name; the first such, if any.
	elsewhere string
	// unreached are schemas that have it where the search_path does not
	// lead, when no schema of the search_path has it.
	unreached []unreachedSchema
	// first is the first schema of the search_path, where Migrate
	// creates courier's tables; known only with unreached ones.
	first string
}

// unreachedSchema is a schema that holds courier's tables where the
// search_path does not lead.
type unreachedSchema struct {
	schema, searchPath string
	inPath, usable     bool // the search_path names it; the role may use it
}

// searchSchemas runs the engine's schema_search, where it has one.
func searchSchemas(ctx context.Context, db interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, d *dialect) (schemaSearch, error) {
	q := d.query("schema_search")
	if q.text == "" {
		return schemaSearch{}, nil
	}
	rows, err := db.QueryContext(ctx, q.text)
	if err != nil {
		return schemaSearch{}, err
	}
	defer rows.Close()
	found := schemaSearch{searched: true}
	var firstHas bool // a relation of the name, a table or not
	var later string
	for rows.Next() { // the search_path's schemas in its order, then the others
		var f unreachedSchema
		var reached, first, table bool
		if err := rows.Scan(&f.schema, &f.searchPath, &reached, &first, &table, &f.inPath, &f.usable, &found.first); err != nil {
			return schemaSearch{}, err
		}
		switch {
		case !reached:
			found.unreached = append(found.unreached, f)
		case first:
			firstHas, found.present = true, table
		case table && later == "":
			later = f.schema
		}
	}
	if err := rows.Err(); err != nil {
		return schemaSearch{}, err
	}
	if !firstHas {
		found.elsewhere = later
	}
	return found, nil
}

// unreached is Open's schema_outdated for a database that has courier's
// tables in a schema the connection's search_path does not lead to
// (PostgreSQL; see the engine's schema_search), as notReached words it.
// Any other verdict, or a look that finds nothing or fails, is returned
// as it is.
func unreached(ctx context.Context, db sqlx.QueryerContext, d *dialect, verdict error) error {
	if !errors.Is(verdict, courier.CodeSchemaOutdated) {
		return verdict
	}
	search, err := searchSchemas(ctx, db, d)
	if err != nil || len(search.unreached) == 0 {
		return verdict
	}
	return notReached(search, false)
}

// notReached is the error for courier's tables found only in schemas the
// search_path does not lead to (found.unreached; none: nil): Open's
// schema_outdated, or Migrate's config_invalid when migrating. It names
// the schemas, for a migration creates new, empty tables in the first
// schema of the search_path, and the deliveries waiting in the others are
// never seen again. A schema the search_path names but the role may not
// use is one PostgreSQL skipped: the error asks for USAGE on it, not for a
// search_path that already names it. Tables in a schema the search_path
// does not name may be another application's, whose courier is its own
// (two in two schemas of one database), which the database cannot tell
// from this one's: the error says how a courier of this application's
// own begins in the first schema (its version table; see package
// store/postgres, under Two couriers in one database).
func notReached(found schemaSearch, migrating bool) error {
	if len(found.unreached) == 0 {
		return nil
	}
	code, grantTodo := courier.CodeSchemaOutdated, "grant the role USAGE on it (see package store/postgres, under Roles and privileges) rather than migrate, "+
		"which would create new, empty tables in the first schema of the search_path that the role may use"
	if migrating {
		code, grantTodo = courier.CodeConfigInvalid, "Migrate would create new, empty tables in the first schema of the search_path that the role may use; "+
			"grant the role USAGE on it, or migrate as its owner"
	}
	if err := unusable(found.unreached, code, grantTodo); err != nil {
		return err
	}
	names := make([]string, len(found.unreached))
	grant := ""
	for i, f := range found.unreached {
		names[i] = strconv.Quote(f.schema)
		if !f.usable {
			grant = ", and grant the role USAGE on it"
		}
	}
	where := "schema " + names[0]
	if len(names) > 1 {
		where = "schemas " + strings.Join(names, ", ")
	}
	first := "the first schema of the search_path"
	if found.first != "" {
		first = "schema " + strconv.Quote(found.first)
	}
	todo := fmt.Sprintf("if they are this application's, name the schema in the search_path "+
		"(the URL's search_path, or ALTER ROLE … IN DATABASE … SET search_path)%s; "+
		"if they are another application's, and this one is to have a courier of its own, create its version table in %s first "+
		"(see package store/postgres, under Two couriers in one database), then migrate", grant, first)
	if migrating {
		into := first
		if found.first != "" {
			into += ", the first of the search_path"
		}
		todo = fmt.Sprintf("Migrate would create new, empty tables in %s, "+
			"and the enqueues of every connection with this search_path would go there, out of reach of the workers of the tables in %s; %s",
			into, where, todo)
	}
	return &coded.Error{Code: code, Msg: fmt.Sprintf(
		"store: no schema of the search_path (%s) has courier's tables, and this database has them in %s: %s",
		found.unreached[0].searchPath, where, todo)}
}

// The engine packages' MigrateTx, for a *sql.Tx, which names no driver.
func init() {
	engine.MigrateTx = func(ctx context.Context, tx *sql.Tx, driver string) error { return migrateTx(ctx, tx, driver) }
}

// migrateTx applies the pending migrations inside tx, a transaction of
// the named driver.
func migrateTx(ctx context.Context, tx DBTX, driver string) error {
	if nilcheck.Nil(tx) {
		return errNoTx
	}
	d, err := dialectOf(driver)
	if err != nil {
		return err
	}
	run := func(name string, args map[string]any) error {
		q := d.query(name)
		if q.text == "" {
			return nil // nothing to do on this engine
		}
		_, err := tx.ExecContext(ctx, q.text, q.args(args)...)
		return err
	}
	// SQLite's schema_lock writes to courier_schema, which the first
	// migration creates: where it is missing, schema_create's CREATE
	// TABLE is the transaction's first write and takes the lock itself.
	// (PostgreSQL's, an advisory lock, names no table.)
	if err := run("schema_lock", nil); err != nil && d.Interpret(err).Kind != engine.Missing {
		return d.interpret("migrate", err)
	}
	found, err := searchSchemas(ctx, tx, d)
	if err != nil {
		return d.interpret("migrate", err)
	}
	if err := refuseToHide(found); err != nil {
		return err
	}
	if err := refuseUnreached(found); err != nil {
		return err
	}
	// The version table is created only where it is missing: an
	// application's role granted courier's tables, without the right to
	// create in their schema, finds a current schema with nothing to do.
	// (SQLite looks for nothing, and always runs schema_create.)
	if !found.present {
		if err := run("schema_create", nil); err != nil {
			return d.interpret("migrate", err)
		}
	}
	var have int
	if err := tx.QueryRowContext(ctx, d.query("schema_version").text).Scan(&have); err != nil {
		return d.interpret("migrate", err)
	}
	if have > len(d.migrations) {
		// A newer courier migrated: nothing to apply, if this courier
		// may run on what it made (see checkSchema).
		return runsOnNewer(d, tx.QueryRowContext(ctx, d.query("schema_required").text))
	}
	for _, m := range d.migrations[have:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			name := fmt.Sprintf("migration %d (%s)", m.Version, m.Name)
			if d.Interpret(err).Kind == engine.Constraint {
				// Rows the migration's constraints refuse: courier did
				// not write them.
				return fmt.Errorf("store: %s: %w: %w", name, &coded.Error{Code: courier.CodeSchemaAltered, Msg: "the tables hold rows courier would not have written"}, err)
			}
			return d.interpret(name, err)
		}
		if err := run("schema_record", map[string]any{"version": m.Version}); err != nil {
			return d.interpret(fmt.Sprintf("migration %d", m.Version), err)
		}
	}
	return d.interpret("migrate", run("schema_analyze", nil))
}

// checkSchema is the guard Open applies: the version must be this
// courier's, courier's tables must have exactly the columns its
// migrations create, and the indexes and triggers its queries rely on
// (an index a query names, a trigger that deletes a delivery's payload
// with it) must be there. Tables of the application are not courier's
// business, whatever their names, nor are indexes and triggers an
// application adds to courier's tables; only their names are compared, as
// a column's are.
//
// A newer courier's schema passes too, unless it says this courier must
// not run on it (runsOnNewer), as long as courier's tables still have the
// columns this courier knows, in its order, before any a newer courier
// added, and the indexes and triggers this courier relies on: a rolling
// deploy runs the release being replaced on the schema of the one
// replacing it, and a rollback runs it there for good (see "Upgrades" in
// the package documentation).
func checkSchema(ctx context.Context, db sqlx.QueryerContext, d *dialect) error {
	var have int
	if err := sqlx.GetContext(ctx, db, &have, d.query("schema_version").text); err != nil {
		if d.Interpret(err).Kind == engine.Missing {
			return schemaOutdated(d, 0, true)
		}
		return d.interpret("schema version", err)
	}
	newer := have > len(d.migrations)
	switch {
	case have < len(d.migrations):
		return schemaOutdated(d, have, false)
	case newer:
		if err := runsOnNewer(d, db.QueryRowxContext(ctx, d.query("schema_required").text)); err != nil {
			return err
		}
	}
	altered := func(err error) error {
		return fmt.Errorf("store: %w", &coded.Error{Code: courier.CodeSchemaAltered, Msg: err.Error()})
	}
	columns, err := byTable(ctx, db, d, "schema_columns", "schema columns")
	if err != nil {
		return err
	}
	for _, t := range d.tables {
		if err := t.check(columns[t.name], newer); err != nil {
			return altered(err)
		}
	}
	// On a newer courier's schema too: it keeps the indexes and triggers
	// this courier relies on, as it keeps its columns (SQLite's queries
	// name some, INDEXED BY, and fail to prepare without them).
	objects, err := byTable(ctx, db, d, "schema_objects", "schema objects")
	if err != nil {
		return err
	}
	for _, t := range d.tables {
		if err := t.checkObjects(objects[t.name]); err != nil {
			return altered(err)
		}
	}
	return nil
}

// schemaOutdated is the guard's schema_outdated for a database at version
// have, behind this courier's (missing: it has no version table at all).
// It names both versions and the first of the engine's migration files
// to apply, so that a team applying them with its own tool knows which it
// lacks.
func schemaOutdated(d *dialect, have int, missing bool) error {
	at := fmt.Sprintf("the database is at version %d", have)
	if missing {
		at = "the database has no courier_schema table (version 0)"
	}
	return &coded.Error{Code: courier.CodeSchemaOutdated, Msg: fmt.Sprintf(
		"store: database schema needs migrating: %s, this courier needs %d: apply %s onward "+
			"(store.Migrate and courier migrate apply them; with your own tool, the engine's Migrations)",
		at, len(d.migrations), d.migrations[max(have, 0)].FileName())}
}

// byTable reads the rows of the guard's query name, each a table and one
// of its names (a column; an index or a trigger, its kind first), into
// lists by table, in the order read.
func byTable(ctx context.Context, db sqlx.QueryerContext, d *dialect, name, what string) (map[string][]string, error) {
	rows, err := db.QueryxContext(ctx, d.query(name).text)
	if err != nil {
		return nil, d.interpret(what, err)
	}
	defer rows.Close()
	out := make(map[string][]string)
	for rows.Next() {
		var table, item string
		if err := rows.Scan(&table, &item); err != nil {
			return nil, d.interpret(what, err)
		}
		out[table] = append(out[table], item)
	}
	return out, d.interpret(what, rows.Err())
}

// runsOnNewer returns schema_too_new when a newer courier's migration
// says this courier must not run on the schema: a row of courier_schema
// whose version is the negated count of migrations a courier must know
// (engine query schema_required). A newer migration that only adds
// records none. row is schema_required's answer. The error names both
// counts, so that an operator who has just rolled back knows how far.
func runsOnNewer(d *dialect, row interface{ Scan(...any) error }) error {
	var required int
	if err := row.Scan(&required); err != nil {
		return d.interpret("schema version", err)
	}
	if required > len(d.migrations) {
		return &coded.Error{Code: courier.CodeSchemaTooNew, Msg: fmt.Sprintf(
			"store: database schema is a newer courier's, which this one must not run on: "+
				"it needs a courier that knows version %d, this one knows %d "+
				"(see Upgrades in the store package's documentation)", required, len(d.migrations))}
	}
	return nil
}

// schemaWatch is the schema guard's cheap form, run by every claim, so a
// schema altered after Open stops claims (code schema_altered) rather
// than leasing rows whose meaning changed. It reads the engine's schema
// fingerprint (SQLite: PRAGMA schema_version, from the file header, and
// courier_schema's latest version; PostgreSQL: the catalog's column list,
// at most once per engine.SchemaRecheck) and runs the full guard again
// only when the fingerprint changed, keeping its verdict for that
// fingerprint.
type schemaWatch struct {
	mu          sync.Mutex
	fingerprint string
	verdict     error // the full guard's on fingerprint: nil, or a schema error
	readAt      int64 // when fingerprint was last read, in the store's clock
}

// start records fp, the fingerprint read before Open's guard accepted the
// schema, read at now.
func (w *schemaWatch) start(fp string, now int64) {
	w.fingerprint, w.readAt = fp, now
}

// check returns the guard's verdict on the schema x sees at now.
func (w *schemaWatch) check(ctx context.Context, x sqlx.QueryerContext, d *dialect, now int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if every := d.SchemaRecheck.Microseconds(); every > 0 && now-w.readAt < every {
		return w.verdict
	}
	fp, err := fingerprint(ctx, x, d)
	if err != nil {
		return err
	}
	w.readAt = now
	if fp == w.fingerprint {
		return w.verdict
	}
	verdict := checkSchema(ctx, x, d)
	if verdict != nil && !isSchemaVerdict(verdict) {
		return verdict // the guard could not tell: ask again next time
	}
	w.fingerprint, w.verdict = fp, verdict
	return verdict
}

// fingerprint reads the engine's schema fingerprint.
func fingerprint(ctx context.Context, x sqlx.QueryerContext, d *dialect) (string, error) {
	var fp string
	if err := sqlx.GetContext(ctx, x, &fp, d.query("schema_fingerprint").text); err != nil {
		return "", d.interpret("schema fingerprint", err)
	}
	return fp, nil
}

// isSchemaVerdict reports whether err is the guard's finding about the
// schema, rather than a failure to read it.
func isSchemaVerdict(err error) bool {
	return errors.Is(err, courier.CodeSchemaAltered) || errors.Is(err, courier.CodeSchemaOutdated) || errors.Is(err, courier.CodeSchemaTooNew)
}

// table is one of courier's tables and its columns, in order, after the
// latest migration.
type table struct {
	name    string
	columns []string
	// objects are the indexes and triggers on the table courier relies
	// on, each its kind and name ("index courier_outbox_due").
	objects []string
}

// checkObjects names the first of t's indexes and triggers missing from
// got, those the database lists on the table (kind and name).
func (t table) checkObjects(got []string) error {
	for _, want := range t.objects {
		if !slices.Contains(got, want) {
			return fmt.Errorf("table %s: %s is missing", t.name, want)
		}
	}
	return nil
}

// check compares a table's columns as the database lists them with what
// courier created, and names the first difference: a column missing, one
// that is not courier's, or one out of place. On a newer courier's schema
// (newer), columns after courier's are that courier's: adding a column
// puts it last.
func (t table) check(got []string, newer bool) error {
	if len(got) == 0 {
		return fmt.Errorf("table %s is missing", t.name)
	}
	for _, want := range t.columns {
		if !slices.Contains(got, want) {
			return fmt.Errorf("table %s: column %s is missing", t.name, want)
		}
	}
	for i, have := range got {
		if !slices.Contains(t.columns, have) && (!newer || i < len(t.columns)) {
			return fmt.Errorf("table %s: column %s is not courier's", t.name, have)
		}
	}
	for i, want := range t.columns { // the same columns, but maybe not in order
		if got[i] != want {
			return fmt.Errorf("table %s: column %d is %s, not %s", t.name, i+1, got[i], want)
		}
	}
	return nil
}

// courierTables are courier's tables, their columns, in order, and the
// indexes and triggers on them courier relies on, after the latest
// migration, on every engine. Where an engine's migrations make them
// otherwise, the engine says how (engine.Engine.Tables and Objects;
// SQLite keeps a delivery's payload in a table of its own, deleted with
// it by a trigger): tablesOf.
var courierTables = func() []table {
	tables := []struct{ name, columns, indexes, triggers string }{
		{"courier_attempts", "id delivery_id attempt owner leased_at lease_expires_at finished_at duration_us outcome http_status error_code remote_code", "courier_attempts_delivery courier_attempts_finished", ""},
		{"courier_contracts", "endpoint capabilities_sha256 pinned_at", "", ""},
		{"courier_endpoint_limits", "endpoint max_in_flight rate burst tokens tokens_at updated_at", "", ""},
		{"courier_endpoints", "endpoint state consecutive_failures failing_since open_until reason updated_at", "", ""},
		{"courier_inbox", "sender dedupe_key payload_sha256 status ack created_at updated_at payload_key_id", "courier_inbox_updated", ""},
		{"courier_outbox", "id notification_id endpoint payload payload_sha256 profile key_id status priority attempts max_attempts next_attempt_at deadline lease_owner lease_token leased_at lease_expires_at last_error_code last_status ack_sha256 created_at updated_at payload_key_id subscription_id subscription_fingerprint contract_sha256 event_type dedupe_key last_remote_code trace_parent trace_state ordering_key hold enqueued_max_attempts spared_attempts",
			"courier_outbox_due courier_outbox_leases courier_outbox_status courier_outbox_listed courier_outbox_endpoint courier_outbox_contract courier_outbox_dedupe courier_outbox_operations courier_outbox_parked courier_outbox_waiting courier_outbox_in_flight", ""},
		{"courier_ordering_keys", "endpoint ordering_key head_id blocked_at updated_at", "courier_ordering_keys_blocked", ""},
		{"courier_replay", "key_id nonce expires_at", "courier_replay_expires", "courier_replay_counted"},
		{"courier_replay_counts", "key_id bucket n", "courier_replay_counts_bucket", ""},
		{"courier_schema", "version applied_at", "", ""},
		{"courier_subscriptions", "id tenant endpoint event_types auth_mode key_id profile fingerprint active created_at updated_at", "courier_subscriptions_tenant", ""},
	}
	out := make([]table, len(tables))
	for i, t := range tables {
		out[i] = table{name: t.name, columns: strings.Fields(t.columns)}
		for _, name := range strings.Fields(t.indexes) {
			out[i].objects = append(out[i].objects, "index "+name)
		}
		for _, name := range strings.Fields(t.triggers) {
			out[i].objects = append(out[i].objects, "trigger "+name)
		}
	}
	return out
}()

// tablesOf returns courier's tables on engine e, by name: courierTables
// as e amends them.
func tablesOf(e *engine.Engine) []table {
	if e.Tables == nil && e.Objects == nil {
		return courierTables
	}
	columns := make(map[string][]string, len(courierTables))
	objects := make(map[string][]string, len(courierTables))
	for _, t := range courierTables {
		columns[t.name] = slices.Clone(t.columns)
		objects[t.name] = slices.Clone(t.objects)
	}
	if e.Tables != nil {
		e.Tables(columns)
	}
	if e.Objects != nil {
		e.Objects(objects)
	}
	out := make([]table, 0, len(columns))
	for _, name := range slices.Sorted(maps.Keys(columns)) {
		out = append(out, table{name: name, columns: columns[name], objects: objects[name]})
	}
	return out
}
