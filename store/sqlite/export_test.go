package sqlite

import (
	"sync"

	"github.com/mattn/go-sqlite3"
)

// SetWALLimit sets the size past which writers opened from now on reset
// the -wal file, and returns the function that puts it back.
func SetWALLimit(n int64) (restore func()) {
	old := walLimit.Swap(n)
	return func() { walLimit.Store(old) }
}

// WALWaits returns how many times writers have waited for the reads in
// progress to reset the -wal file.
func WALWaits() int64 { return walWaits.Load() }

// connectHooks are the functions OnConnect has the connections to a file
// run as they open, by file.
var connectHooks sync.Map // string -> func(*sqlite3.SQLiteConn) error

func init() {
	hook := courierDriver.base.ConnectHook
	courierDriver.base.ConnectHook = func(c *sqlite3.SQLiteConn) error {
		if err := hook(c); err != nil {
			return err
		}
		file, err := connFile(c)
		if err != nil {
			return err
		}
		if fn, ok := connectHooks.Load(file); ok {
			return fn.(func(*sqlite3.SQLiteConn) error)(c)
		}
		return nil
	}
}

// OnConnect has every connection to file opened from now on (the
// writer's too) run fn as it opens, until restore.
func OnConnect(file string, fn func(*sqlite3.SQLiteConn) error) (restore func()) {
	connectHooks.Store(file, fn)
	return func() { connectHooks.Delete(file) }
}
