package store

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/courier-go/courier/internal/sqlfile"
)

//go:embed sql
var sqlFiles embed.FS

// query is one named statement of a dialect, its :name parameters compiled
// to the engine's placeholders once, at load time.
type query struct {
	name  string
	text  string   // with placeholders
	binds []string // parameter name of each placeholder, in order
}

// args lays out the named values in placeholder order.
func (q *query) args(named map[string]any) []any {
	out := make([]any, len(q.binds))
	for i, name := range q.binds {
		v, ok := named[name]
		if !ok {
			panic("store: query " + q.name + " has no value for :" + name)
		}
		out[i] = v
	}
	return out
}

// placeholder writes the n-th (1-based) positional parameter.
type placeholder func(n int) string

func questionMark(int) string   { return "?" }
func dollarNumber(n int) string { return "$" + strconv.Itoa(n) }

// loadQueries reads a dialect's queries.sql and compiles each statement's
// parameters for the engine.
func loadQueries(dialect string, ph placeholder) (map[string]*query, error) {
	b, err := sqlFiles.ReadFile(path.Join("sql", dialect, "queries.sql"))
	if err != nil {
		return nil, err
	}
	stmts, err := sqlfile.Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", dialect, err)
	}
	queries := make(map[string]*query, len(stmts))
	for name, text := range stmts {
		queries[name] = compile(name, text, ph)
	}
	return queries, nil
}

// compile replaces each :name (not ::cast) with a placeholder. The SQL
// files hold no string literal with a colon in it.
func compile(name, sql string, ph placeholder) *query {
	q := &query{name: name}
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
		q.binds = append(q.binds, sql[i+1:j])
		out.WriteString(ph(len(q.binds)))
		i = j - 1
	}
	q.text = strings.TrimSpace(out.String())
	return q
}

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads a dialect's NNN_name.sql files in order.
func loadMigrations(dialect string) ([]migration, error) {
	dir := path.Join("sql", dialect)
	entries, err := fs.ReadDir(sqlFiles, dir)
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, rest, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(rest, ".sql") {
			continue
		}
		b, err := sqlFiles.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(rest, ".sql"), sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("store: %s: migrations are not numbered 1..n (found %d at %d)", dialect, m.version, i+1)
		}
	}
	return ms, nil
}
