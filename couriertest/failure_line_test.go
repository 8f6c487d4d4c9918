package couriertest_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/refusing"
	"github.com/courier-go/courier/store"
)

// TestPostgresFailuresNameTheCallersLine: when there is no PostgreSQL for
// a test that requires it, the failure (or the skip) is reported at the
// line of the application's test that asked for the database, as a test
// helper's is, not inside the kit: PostgresURL did not mark itself a
// helper, so every such failure, PostgresStore's and PostgresStores'
// too, named couriertest's postgres.go. The calls run in a child test
// process whose COURIER_PG_URL names a server that refuses connections.
func TestPostgresFailuresNameTheCallersLine(t *testing.T) {
	if os.Getenv("COURIERTEST_FAILURE_LINE_CHILD") != "" {
		t.Skip("the child runs TestPostgresFailureLineChild only")
	}
	t.Parallel()
	refused := refusing.Addr(t) // held by this process until the test ends
	for _, require := range []string{"1", ""} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPostgresFailureLineChild$", "-test.v")
		cmd.Env = append(os.Environ(),
			"COURIERTEST_FAILURE_LINE_CHILD=1",
			"COURIER_PG_URL=postgres://courier@"+refused+"/postgres?connect_timeout=5",
			"COURIER_PG_REQUIRE="+require)
		out, _ := cmd.CombinedOutput()
		for _, call := range []string{"PostgresURL(t)", "PostgresStore(t, ", "PostgresStores(t, "} {
			want := "failure_line_test.go:" + strconv.Itoa(childLine(t, "couriertest."+call)) + ": "
			if !strings.Contains(string(out), want) {
				t.Errorf("COURIER_PG_REQUIRE=%q: %s reported elsewhere than the caller's line (%s):\n%s", require, call, want, out)
			}
		}
	}
}

// childLine returns the line of this file on which TestPostgresFailureLineChild
// makes call.
func childLine(t *testing.T, call string) int {
	t.Helper()
	src, err := os.ReadFile("failure_line_test.go")
	if err != nil {
		t.Fatal(err)
	}
	child := strings.Index(string(src), "func TestPostgresFailureLineChild")
	i := strings.Index(string(src)[child:], call)
	if child < 0 || i < 0 {
		t.Fatalf("no %s in TestPostgresFailureLineChild", call)
	}
	return strings.Count(string(src)[:child+i], "\n") + 1
}

// TestPostgresFailureLineChild asks for databases where there is no
// server: TestPostgresFailuresNameTheCallersLine reads its report.
func TestPostgresFailureLineChild(t *testing.T) {
	if os.Getenv("COURIERTEST_FAILURE_LINE_CHILD") == "" {
		t.Skip("run by TestPostgresFailuresNameTheCallersLine")
	}
	t.Run("url", func(t *testing.T) {
		couriertest.PostgresURL(t)
	})
	t.Run("store", func(t *testing.T) {
		couriertest.PostgresStore(t, store.Config{})
	})
	t.Run("stores", func(t *testing.T) {
		couriertest.PostgresStores(t, 2, store.Config{})
	})
}
