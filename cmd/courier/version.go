package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"runtime/debug"

	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// versionCmd says which courier the tool is: its module's version as the
// build recorded it, the commit it was built from when the build stamped
// one, the schema version its migrations bring a database to, and the Go
// that built it. During a rolling deploy an operator runs the release
// whose schema the database has (see migrate), and asks a binary which
// it is here.
func versionCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flags("version", stderr, "")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	schema, err := schemaOf()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "courier %s, schema version %d, %s %s/%s\n", buildVersion(), schema, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// buildVersion is the version of courier's module the build recorded, as
// go install …@version or a build in a tagged checkout writes it, and
// the commit its checkout was at (with "+modified" when it had changes),
// when the build stamped it; "(devel)" when neither is known.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev != "" {
		v += " (commit " + rev[:min(len(rev), 12)] + modified + ")"
	}
	return v
}

// schemaOf is the schema version this courier's migrations bring a
// database to: the number of its migrations, the same on both engines
// (migrate and version say it).
func schemaOf() (int, error) {
	var n []int
	for _, files := range []fs.FS{sqlite.Migrations(), postgres.Migrations()} {
		names, err := fs.Glob(files, "*.sql")
		if err != nil {
			return 0, err
		}
		n = append(n, len(names))
	}
	if n[0] != n[1] {
		return 0, fmt.Errorf("the engines' migrations differ in number: sqlite %d, postgres %d", n[0], n[1])
	}
	return n[0], nil
}
