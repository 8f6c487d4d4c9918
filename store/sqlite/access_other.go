//go:build !unix

package sqlite

// writeAccess returns nil: off Unix no look precedes SQLite's own open,
// and Open's check that the file can be written (checkWritable) is the
// one that refuses a file this process may not write.
func writeAccess(string) error { return nil }
