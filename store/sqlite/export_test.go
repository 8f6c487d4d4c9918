package sqlite

// SetWALLimit sets the size past which writers opened from now on reset
// the -wal file, and returns the function that puts it back.
func SetWALLimit(n int64) (restore func()) {
	old := walLimit.Swap(n)
	return func() { walLimit.Store(old) }
}

// WALWaits returns how many times writers have waited for the reads in
// progress to reset the -wal file.
func WALWaits() int64 { return walWaits.Load() }
