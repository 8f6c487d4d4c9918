package store

import (
	"fmt"
	"io/fs"

	"github.com/courier-go/courier/internal/sqlfile"
	"github.com/courier-go/courier/store/internal/engine"
)

// query is one named statement of a dialect, its :name parameters compiled
// to the engine's placeholders once, at load time. A statement with no
// text is one the engine has nothing to do for.
type query struct {
	name  string
	text  string   // with placeholders
	binds []string // parameter name of each placeholder, in order
}

// args lays out the named values in placeholder order, a bound's (see
// engine.Bound) where named has none.
func (q *query) args(named map[string]any) []any {
	out := make([]any, len(q.binds))
	for i, name := range q.binds {
		v, ok := named[name]
		if !ok {
			v, ok = engine.Bound(name)
		}
		if !ok {
			panic("store: query " + q.name + " has no value for :" + name)
		}
		out[i] = v
	}
	return out
}

// loadQueries reads an engine's queries/*.sql and compiles each
// statement's parameters for it.
func loadQueries(e *engine.Engine) (map[string]*query, error) {
	files, err := fs.Glob(e.SQL, "queries/*.sql")
	if err != nil {
		return nil, err
	}
	queries := make(map[string]*query)
	for _, f := range files {
		b, err := fs.ReadFile(e.SQL, f)
		if err != nil {
			return nil, err
		}
		stmts, err := sqlfile.Parse(string(b))
		if err != nil {
			return nil, fmt.Errorf("store: %s %s: %w", e.Name, f, err)
		}
		for name, text := range stmts {
			if _, dup := queries[name]; dup {
				return nil, fmt.Errorf("store: %s: query %s defined twice", e.Name, name)
			}
			queries[name] = compile(name, text, e.Placeholder)
		}
	}
	return queries, nil
}

// compile compiles a statement's :name parameters to placeholders.
func compile(name, sql string, placeholder func(int) string) *query {
	text, binds := sqlfile.Compile(sql, placeholder)
	return &query{name: name, text: text, binds: binds}
}
