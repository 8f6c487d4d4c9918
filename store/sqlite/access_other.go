//go:build !linux

package sqlite

// writeAccess returns nil: off Linux no look precedes SQLite's own open
// (access(2), the look every Unix has, judges as the real user without
// the process's privileges, and would refuse a process that open(2) lets
// write the file), and the writer's check that the file can be written
// (checkWritable), under Open and store.Open, is the one that refuses a
// file this process may not write.
func writeAccess(string) error { return nil }
