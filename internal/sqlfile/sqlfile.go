// Package sqlfile reads the named statements of a .sql file: each begins
// with a "-- name: x" line and runs to the next one. Comment lines are
// dropped, so a statement's documentation can sit beside it in the file.
package sqlfile

import (
	"fmt"
	"strings"
)

// Parse returns the statements of src by name. A name given twice is an
// error; text before the first name is ignored.
func Parse(src string) (map[string]string, error) {
	out := make(map[string]string)
	var name string
	var text strings.Builder
	flush := func() error {
		if name == "" {
			return nil
		}
		if _, dup := out[name]; dup {
			return fmt.Errorf("sqlfile: statement %q defined twice", name)
		}
		out[name] = strings.TrimSpace(text.String())
		text.Reset()
		return nil
	}
	for line := range strings.Lines(src) {
		if rest, ok := strings.CutPrefix(line, "-- name:"); ok {
			if err := flush(); err != nil {
				return nil, err
			}
			name = strings.TrimSpace(rest)
			continue
		}
		if name == "" || strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		text.WriteString(line)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// Require returns an error naming the first of names that stmts lacks.
func Require(stmts map[string]string, names ...string) error {
	for _, n := range names {
		if stmts[n] == "" {
			return fmt.Errorf("sqlfile: no statement %q", n)
		}
	}
	return nil
}
