// Package tablerows reads what a Store's tables hold, for tests that
// compare it before and after an action or search it for what must not be
// stored.
package tablerows

import (
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
)

// Read returns the rows query reads from s's database, in its order, each
// a map of its columns by name with a []byte value as a string, so that
// fmt and encoding/json print a row as text whatever its engine.
func Read(tb testing.TB, s *store.Store, query string) []map[string]any {
	tb.Helper()
	rs, err := s.DB().QueryContext(tb.Context(), query)
	if err != nil {
		tb.Fatal(err)
	}
	defer rs.Close()
	var rows []map[string]any
	for rs.Next() {
		row := map[string]any{}
		if err := sqlx.MapScan(rs, row); err != nil {
			tb.Fatal(err)
		}
		for k, v := range row {
			if b, ok := v.([]byte); ok {
				row[k] = string(b)
			}
		}
		rows = append(rows, row)
	}
	if err := rs.Err(); err != nil {
		tb.Fatal(err)
	}
	return rows
}
