package pgtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakePrograms creates executable files named names in a new directory
// dir/sub and returns it.
func fakePrograms(t *testing.T, dir, sub string, names ...string) string {
	t.Helper()
	d := filepath.Join(dir, sub)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(d, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func TestFindBinaries(t *testing.T) {
	// Not parallel: the cases set PATH.
	root := t.TempDir()
	onPath := fakePrograms(t, root, "path", "initdb", "postgres")
	initdbOnly := fakePrograms(t, root, "initdb-only", "initdb")
	postgresOnly := fakePrograms(t, root, "postgres-only", "postgres")
	empty := fakePrograms(t, root, "empty")
	fakePrograms(t, root, "lib/9.6/bin", "initdb", "postgres")
	newest := fakePrograms(t, root, "lib/15/bin", "initdb", "postgres")
	fakePrograms(t, root, "lib/16/bin", "initdb") // incomplete: skipped
	fakePrograms(t, root, "lib/beta/bin", "initdb", "postgres")
	fallback := filepath.Join(root, "lib/*/bin")
	noFallback := filepath.Join(root, "nowhere/*/bin")

	for _, tc := range []struct {
		name     string
		binDir   string
		path     string
		fallback string
		want     binaries
		wantErr  string
	}{
		{
			name: "bin dir", binDir: onPath, path: empty, fallback: fallback,
			want: binaries{filepath.Join(onPath, "initdb"), filepath.Join(onPath, "postgres")},
		},
		{
			name: "bin dir without postgres", binDir: initdbOnly, path: onPath, fallback: fallback,
			wantErr: "COURIER_PG_BIN=" + initdbOnly + ": no postgres program",
		},
		{
			name: "PATH", path: onPath, fallback: fallback,
			want: binaries{filepath.Join(onPath, "initdb"), filepath.Join(onPath, "postgres")},
		},
		{
			name: "PATH, split", path: initdbOnly + ":" + postgresOnly, fallback: fallback,
			want: binaries{filepath.Join(initdbOnly, "initdb"), filepath.Join(postgresOnly, "postgres")},
		},
		{
			name: "fallback, newest complete version", path: empty, fallback: fallback,
			want: binaries{filepath.Join(newest, "initdb"), filepath.Join(newest, "postgres")},
		},
		{
			name: "nowhere", path: initdbOnly, fallback: noFallback,
			wantErr: "initdb and postgres not found on PATH or in " + noFallback,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.path)
			got, err := findBinaries(tc.binDir, tc.fallback)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("findBinaries() error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("findBinaries() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		admin, want string
	}{
		{"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/courier_x?sslmode=disable"},
		{"postgresql://u:p%40ss@db.example:6543", "postgresql://u:p%40ss@db.example:6543/courier_x"},
		{"postgres://u@h/admin?dbname=admin&sslmode=require", "postgres://u@h/courier_x?sslmode=require"},
	} {
		got, err := databaseURL(tc.admin, "courier_x")
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("databaseURL(%q) = %q, want %q", tc.admin, got, tc.want)
		}
	}
}
