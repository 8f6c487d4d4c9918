// Package sqlfile reads the named statements of a .sql file: each begins
// with a "-- name: x" line and runs to the next one. Comment lines are
// dropped, so a statement's documentation can sit beside it in the file.
package sqlfile

import (
	"fmt"
	"slices"
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

// Compile replaces each :name parameter of a statement (not a ::cast)
// with the engine's placeholder for its position, and returns the text
// and the parameter name of each placeholder in order. Statements hold no
// string literal with a colon in it.
func Compile(sql string, placeholder func(n int) string) (text string, params []string) {
	var out strings.Builder
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		if c != ':' {
			out.WriteByte(c)
			continue
		}
		if i+1 < len(sql) && sql[i+1] == ':' { // a PostgreSQL cast
			out.WriteString("::")
			i++
			continue
		}
		j := i + 1
		for j < len(sql) && (sql[j] == '_' || 'a' <= sql[j] && sql[j] <= 'z' || '0' <= sql[j] && sql[j] <= '9') {
			j++
		}
		if j == i+1 {
			out.WriteByte(c)
			continue
		}
		params = append(params, sql[i+1:j])
		out.WriteString(placeholder(len(params)))
		i = j - 1
	}
	return strings.TrimSpace(out.String()), params
}

// Params returns the distinct :name parameters of a statement, sorted.
func Params(sql string) []string {
	_, params := Compile(sql, func(int) string { return "?" })
	slices.Sort(params)
	return slices.Compact(params)
}
