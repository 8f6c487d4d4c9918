//go:build !unix

package sqlite

// writeAccess returns nil: off Unix no look precedes SQLite's own open,
// and the writer's check that the file can be written (checkWritable),
// under Open and store.Open, is the one that refuses a file this process
// may not write.
func writeAccess(string) error { return nil }
