// Package sqlfile reads the named statements of a .sql file: each begins
// with a "-- name: x" line and runs to the next one. Comment lines are
// dropped, so a statement's documentation can sit beside it in the file.
//
// A "-- fragment: x" line begins a fragment instead: text that the
// statements of the same file take in where they write {{x}}, so that
// statements that must reckon alike share one text. A fragment is no
// statement; one no statement takes in, or a {{x}} no fragment defines,
// is an error.
package sqlfile

import (
	"fmt"
	"slices"
	"strings"
)

// Parse returns the statements of src by name, their fragments taken
// in. A name given twice is an error; text before the first name is
// ignored.
func Parse(src string) (map[string]string, error) {
	out := make(map[string]string)
	fragments := make(map[string]string)
	var name string
	var into map[string]string // out or fragments: where name's text goes
	var text strings.Builder
	flush := func() error {
		if name == "" {
			return nil
		}
		_, dupStatement := out[name]
		_, dupFragment := fragments[name]
		if dupStatement || dupFragment {
			return fmt.Errorf("sqlfile: %q defined twice", name)
		}
		into[name] = strings.TrimSpace(text.String())
		text.Reset()
		return nil
	}
	for line := range strings.Lines(src) {
		next, rest := header(line, out, fragments)
		if next == nil { // a line of the text, or a comment
			if name != "" && !strings.HasPrefix(strings.TrimSpace(line), "--") {
				text.WriteString(line)
			}
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		name, into = strings.TrimSpace(rest), next
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if err := takeIn(out, fragments); err != nil {
		return nil, err
	}
	return out, nil
}

// header reads line as the start of a statement ("-- name: x") or of a
// fragment ("-- fragment: x"): it returns where the text that follows
// goes (statements or fragments) and the rest of the line, which names
// it; nil when line starts neither.
func header(line string, statements, fragments map[string]string) (map[string]string, string) {
	if rest, ok := strings.CutPrefix(line, "-- name:"); ok {
		return statements, rest
	}
	if rest, ok := strings.CutPrefix(line, "-- fragment:"); ok {
		return fragments, rest
	}
	return nil, ""
}

// takeIn replaces each {{x}} of the statements with fragment x.
func takeIn(stmts, fragments map[string]string) error {
	for f, text := range fragments {
		ref, used := "{{"+f+"}}", false
		for name, stmt := range stmts {
			if strings.Contains(stmt, ref) {
				stmts[name], used = strings.ReplaceAll(stmt, ref, text), true
			}
		}
		if !used {
			return fmt.Errorf("sqlfile: fragment %q is taken in by no statement", f)
		}
	}
	for name, stmt := range stmts {
		if _, ref, ok := strings.Cut(stmt, "{{"); ok {
			ref, _, _ = strings.Cut(ref, "}}")
			return fmt.Errorf("sqlfile: statement %q takes in %q, which no fragment defines", name, ref)
		}
	}
	return nil
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
