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
