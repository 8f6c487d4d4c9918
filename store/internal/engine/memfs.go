package engine

import (
	"bytes"
	"io"
	"io/fs"
	"maps"
	"slices"
	"time"
)

// memFS is a flat, read-only directory of files held in memory: the
// migration files an engine exports, which are built from its SQL rather
// than embedded as they are.
type memFS map[string][]byte

var (
	_ fs.ReadDirFS  = memFS(nil)
	_ fs.ReadFileFS = memFS(nil)
)

// Open opens the directory "." or one of its files.
func (m memFS) Open(name string) (fs.File, error) {
	if name == "." {
		return &memDir{entries: m.entries()}, nil
	}
	b, ok := m[name]
	if !ok || !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memFile{Reader: bytes.NewReader(b), info: memInfo{name: name, size: int64(len(b))}}, nil
}

// ReadFile returns a copy of a file's bytes.
func (m memFS) ReadFile(name string) ([]byte, error) {
	b, ok := m[name]
	if !ok || !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrNotExist}
	}
	return bytes.Clone(b), nil
}

// ReadDir lists the directory ".", sorted by name.
func (m memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return m.entries(), nil
}

func (m memFS) entries() []fs.DirEntry {
	var out []fs.DirEntry
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fs.FileInfoToDirEntry(memInfo{name: name, size: int64(len(m[name]))}))
	}
	return out
}

// memFile is an open file of a memFS.
type memFile struct {
	*bytes.Reader
	info memInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

// memDir is the open directory of a memFS.
type memDir struct {
	entries []fs.DirEntry
	read    int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return memInfo{name: ".", dir: true}, nil }
func (d *memDir) Close() error               { return nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: fs.ErrInvalid}
}

// ReadDir returns the next n entries, or all that are left when n <= 0.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	left := d.entries[d.read:]
	if n <= 0 {
		d.read = len(d.entries)
		return left, nil
	}
	if len(left) == 0 {
		return nil, io.EOF
	}
	left = left[:min(n, len(left))]
	d.read += len(left)
	return left, nil
}

// memInfo describes a file or the directory of a memFS.
type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
