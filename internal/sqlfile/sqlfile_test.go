package sqlfile_test

import (
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/sqlfile"
)

func TestParse(t *testing.T) {
	t.Parallel()
	src := `-- header comment, ignored
-- name: one
-- what one does
SELECT 1;

-- name: two
SELECT 2
  FROM x; -- trailing comments stay
`
	got, err := sqlfile.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["one"] != "SELECT 1;" || got["two"] != "SELECT 2\n  FROM x; -- trailing comments stay" {
		t.Fatalf("Parse = %q", got)
	}
	if err := sqlfile.Require(got, "one", "three"); err == nil || !strings.Contains(err.Error(), "three") {
		t.Fatalf("Require = %v", err)
	}
	if _, err := sqlfile.Parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n"); err == nil {
		t.Fatal("a duplicate name was accepted")
	}
}

// TestParseTakesInFragments: a statement takes in a fragment of its file
// where it writes {{name}}, as often as it writes it; the fragment is no
// statement. A fragment no statement takes in, one defined twice, and a
// {{name}} no fragment defines are errors.
func TestParseTakesInFragments(t *testing.T) {
	t.Parallel()
	src := `-- name: first
SELECT {{room}} AS a, {{room}} AS b FROM e;

-- fragment: room
-- the room of an endpoint
LEAST(:cap, e.n)

-- name: second
SELECT {{room}} FROM e
`
	got, err := sqlfile.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["first"] != "SELECT LEAST(:cap, e.n) AS a, LEAST(:cap, e.n) AS b FROM e;" || got["second"] != "SELECT LEAST(:cap, e.n) FROM e" {
		t.Fatalf("Parse = %q", got)
	}
	for name, src := range map[string]string{
		"unused":        "-- fragment: room\nLEAST(1, 2)\n-- name: a\nSELECT 1;\n",
		"undefined":     "-- name: a\nSELECT {{room}};\n",
		"twice":         "-- fragment: room\n1\n-- fragment: room\n2\n-- name: a\nSELECT {{room}};\n",
		"as both kinds": "-- fragment: a\n1\n-- name: a\nSELECT {{a}};\n",
	} {
		if got, err := sqlfile.Parse(src); err == nil {
			t.Errorf("%s: Parse = %q, want an error", name, got)
		}
	}
}
