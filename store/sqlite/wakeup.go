package sqlite

import (
	"context"
	"database/sql/driver"
	"sync"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"
)

// wakeups fans commit notifications out per database file.
var wakeups = struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}{subs: make(map[string]map[chan struct{}]struct{})}

// hookCommits watches a connection: a write that may make a delivery due
// marks the transaction, and its commit wakes the database's listeners.
// Such a write is an insert into courier_outbox (an enqueue), or a write
// of a payload (courier_outbox_payload, migration 13), which goes with
// every insert and with a publish that sends a delivery again in place
// (outbox_publish_revive, an UPDATE, as claims and settles are, which
// must not wake: a settle would wake the workers for nothing, and each
// would claim again). The commit hook runs just before the commit
// completes; a woken worker's claim begins IMMEDIATE, so it waits for
// the commit and then sees the row.
func hookCommits(conn *sqlite3.SQLiteConn) error {
	file, err := connFile(conn)
	if err != nil || file == "" { // in-memory databases are not shared
		return err
	}
	var mu sync.Mutex
	dirty := false
	conn.RegisterUpdateHook(func(op int, _ string, table string, _ int64) {
		if op == sqlite3.SQLITE_INSERT && table == "courier_outbox" || op != sqlite3.SQLITE_DELETE && table == "courier_outbox_payload" {
			mu.Lock()
			dirty = true
			mu.Unlock()
		}
	})
	conn.RegisterCommitHook(func() int {
		mu.Lock()
		wake := dirty
		dirty = false
		mu.Unlock()
		if wake {
			notify(file)
		}
		return 0
	})
	conn.RegisterRollbackHook(func() {
		mu.Lock()
		dirty = false
		mu.Unlock()
	})
	return nil
}

// connFile returns the path of a connection's main database file.
func connFile(conn *sqlite3.SQLiteConn) (string, error) {
	rows, err := conn.Query("PRAGMA database_list", nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	for rows.Next(vals) == nil {
		if name, _ := vals[1].(string); name == "main" {
			file, _ := vals[2].(string)
			return file, nil
		}
	}
	return "", nil
}

func notify(file string) {
	wakeups.mu.Lock()
	defer wakeups.mu.Unlock()
	for ch := range wakeups.subs[file] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// wake wakes the listeners of db's file in this process.
func wake(ctx context.Context, db *sqlx.DB) error {
	file, err := mainFile(ctx, db)
	if err == nil && file != "" {
		notify(file)
	}
	return err
}

// listen subscribes to the commits of db's file by connections of this
// process opened with DriverName.
func listen(ctx context.Context, db *sqlx.DB) (<-chan struct{}, func(), error) {
	file, err := mainFile(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	if file == "" {
		return ch, func() {}, nil // in-memory: polling only
	}
	wakeups.mu.Lock()
	if wakeups.subs[file] == nil {
		wakeups.subs[file] = make(map[chan struct{}]struct{})
	}
	wakeups.subs[file][ch] = struct{}{}
	wakeups.mu.Unlock()
	return ch, func() {
		wakeups.mu.Lock()
		delete(wakeups.subs[file], ch)
		if len(wakeups.subs[file]) == 0 {
			delete(wakeups.subs, file)
		}
		wakeups.mu.Unlock()
	}, nil
}
