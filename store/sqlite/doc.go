// Package sqlite is courier's SQLite engine: the embedded default, one
// database file on one host, through mattn/go-sqlite3 (cgo).
//
// It builds with cgo only: a C compiler (on PATH, or named by CC) and
// CGO_ENABLED unset or 1. Where the go command finds no C compiler it sets
// CGO_ENABLED=0 itself, and this package then fails to compile with errors
// about go-sqlite3's names (sqlite3.SQLiteConn, sqlite3.Error), not about cgo. A program that must build
// without cgo (a static binary, a scratch image) imports package postgres,
// which needs none, and not this package.
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
// rows by polling). Give such a pool DSN's settings (DSN(path,
// durability)): with go-sqlite3's default, a transaction begins deferred
// and reads from a snapshot until its first write, which SQLite refuses at
// once, whatever the busy timeout, if another connection or process has
// committed since; an Enqueue after a read in such a transaction fails
// with code database_unavailable, its message saying so, and fails again
// however often the transaction tries it: roll it back.
//
// SQLite has one writer at a time. The Store writes through a connection
// of its own (see store.Store.Begin), so the application's business
// transactions that go through Store.Begin queue with courier's writes in
// Go, instead of in SQLite's sleeping busy handler. While a receiver's
// transaction holds that writer, a write through the Store's DB() from the
// application's function would wait for it until the busy timeout: the
// connections of a pool opened with DriverName refuse it at once, with
// code write_outside_transaction, and the function writes through the
// transaction it was given instead. A read-only transaction
// (sql.TxOptions{ReadOnly: true}) through such a pool begins deferred,
// not IMMEDIATE as the DSN's others do, so it reads the last commit
// without waiting for the writer, from a receiver's function too; SQLite
// refuses a write in it (query_only) with its read-only error.
//
// The writer keeps its temporary storage in memory (temp_store=MEMORY).
// A statement inside a transaction that changes several rows, or has
// RETURNING, keeps a statement journal, a copy of each page it changes,
// until it ends; SQLite's default buffers it in 64 KiB of its own for
// each statement, at a cost to every claim and settle, and moves a larger
// one to a temporary file. Courier's statements on the writer each change
// a batch bounded by its limit or by the leases its workers hold. A
// statement of the application's in a transaction of Store.Begin (a
// receiver's function, an enqueue's business transaction) keeps in memory
// what SQLite's default would have moved to temporary files: the journal
// of a statement that rewrites many existing rows, and the sorts,
// temporary tables and indexes of a large unindexed ORDER BY, GROUP BY or
// DISTINCT. Write such bulk changes in batches, and read large results
// through the Store's DB(), whose pool, like every pool of DriverName,
// keeps SQLite's default.
//
// Several processes on the file's host may use it at once: the
// application's, a second instance of it, the courier tool from a shell or
// cron, a backup, a sqlite3 shell. SQLite's locks keep their writes one at
// a time, each process's Store writing through a connection of its own. A
// write waits for another process's write transaction to end, up to 10 s
// (the busy timeout), and then fails with code database_unavailable: a
// receiver answers 503 with Retry-After, a worker logs its failed claim
// and claims again. Each of the Store's writes waits for that lock 10 s at
// most from when it asks, its time queued behind the Store's other writes
// that waited for it too (which take its one writer in turn) included,
// rather than 10 s more once its turn comes. The queue itself has no
// bound: behind a transaction of this process that holds the writer
// (Store.Begin's: the application's, or a receiver's while its function
// runs) a write waits until that transaction ends, or its own context
// does, and then has its 10 s. So a Store method that writes, given a nil
// transaction while the same goroutine holds one of Store.Begin open,
// waits until its context ends: pass it that transaction. (A write given
// the context of a receiver's function fails at once instead: see
// store.Store.Begin.)
// Keep other processes' write transactions short, as the tool's are (it
// prunes and redrives in batches, each a short transaction of its own;
// migrate with nothing pending takes no lock). Open, and migrate with
// nothing pending, go on while another process holds the lock. A commit
// wakes the workers of its own process only: a delivery another process
// enqueues, or the tool redrives, is claimed at the next poll
// (client.Config.PollInterval, 1 s by default). Every connection courier
// opens, in every process, the tool's included, is configured as DSN
// says (the tool's, but migrate's, leave the file's journal mode as they
// find it: WAL in a file courier migrated, and any other file, which they
// refuse, unchanged); none is read-only, so every process, the tool's
// included (health and list too), must be able to write the file.
//
// Open refuses a database file this process cannot write (SQLite would
// open it read-only without a word), and so do store.Open and
// store.Migrate on a pool of DriverName, with code database_unavailable.
// On Unix every connection of DriverName is refused before SQLite opens
// the file when the kernel says this process may not write it, or its
// -wal or -shm file (those beside the file a symlink leads to, where
// SQLite keeps them); on Linux 5.8 and later the kernel judges as open(2)
// would, as the process's effective user and groups, with its
// capabilities and the file's ACLs (faccessat2), elsewhere as its user
// and groups (access(2); a process granted CAP_DAC_OVERRIDE is let
// through). Opened read-only, SQLite would create the -wal and -shm
// files beside it where the directory lets it, this process's and
// read-only to the file's owner, whose own processes could then not open
// the database until they were removed; refused, nothing is created. A
// file: URI that opens the file read-only on purpose (mode=ro,
// immutable=1) is let through. Where the kernel cannot say (off Unix, or a
// seccomp policy that refuses both calls), Open and store.Open still
// refuse such a file, through SQLite once it has opened it, which may
// have created the two files by then.
// (go-sqlite3's own driver, "sqlite3", opens the file as SQLite does.) A
// connection that finds its database read-only later is dropped, so once
// the permissions are mended the next write opens the file afresh,
// without a restart.
//
// In WAL mode each commit appends to the -wal file beside the database,
// which starts over only at a moment no read is in progress: while reads
// overlap without a pause (the application's own queries on the file, a
// probe in a loop) it would grow with every commit. The Store's writer
// keeps it near 64 MiB: past that, it waits up to 250 ms for the reads in
// progress to end (writes queue meanwhile) and empties it, and SQLite
// truncates it back to 64 MiB whenever it starts over by itself. A read
// transaction held open for long, in any process (a backup, a sqlite3
// shell left in a BEGIN), still holds the file's growth with it: the file
// grows by every commit for as long as the read lasts (the disk must hold
// that much), and the writer, after a wait that found it still reading,
// waits again only each time the file has doubled, rather than hold up
// the application's writes 250 ms in every 64 commits for as long as the
// read lasts; in between it tries without waiting, every 64 commits, and
// the first try after the read ends that finds no other read in progress
// brings the file back to 64 MiB.
//
// The -wal file holds commits not yet copied into the database file: one
// removed (or replaced) while the database is open leaves SQLite
// committing into the unlinked file without an error, where a crash
// loses them, and connections opened afterwards fail with an I/O error.
// Every 64 commits the Store's writer looks: once it finds its -wal file
// gone, it copies what the file holds into the database file and
// refuses every write from then on, with code database_unavailable (an
// enqueue fails, a receiver answers 503 with Retry-After, a worker logs
// its failed claims and settles), until the Store is closed and opened
// again, in a new process if need be.
//
// Back up through SQLite, never by copying the files while any process has
// the database open: the latest commits are in the -wal file, so the
// database file alone lacks them, and a checkpoint that writes them into
// the database file while cp (or a snapshot that is not atomic) reads it
// leaves a copy, the database file alone or with its -wal copied after
// it, that holds parts of commits: SQLite may find it corrupt (Outbox.Check
// on it reports database_corrupt), or find nothing while a delivery's
// rows and its business rows are from different instants. VACUUM INTO
// 'backup.db' (through the Store's DB(), or a sqlite3 shell), sqlite3's
// .backup and the online backup API each copy one transaction's snapshot,
// while the application runs: every delivery is in the copy exactly when
// its business rows are. To restore, stop every process that has the file
// open, put the copy in its place and remove the -wal and -shm files
// beside it: SQLite replays a -wal left there (by a process that crashed)
// into the copy, and corrupts it. The copy's deliveries then go on as
// package postgres says under Backups and restores: those leased when it
// was made are sent again once their leases run out, and a receiver answers
// what it already processed as a duplicate.
//
// Commits are durable by default (synchronous=FULL; see
// store.Config.Durability). The database and every process writing it
// share one host, so the store's clock is the process's (time.Now): a
// step of the host's wall clock longer than a lease can have a delivery
// sent twice at once (see store.Config.Now).
package sqlite
