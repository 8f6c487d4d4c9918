package couriertest_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/courier-go/courier/couriertest"
)

// TestPostgresServerHoldsNoGoroutine: the throwaway server outlives the
// tests, until Main stops it, so a goroutine of the kit waiting on it was
// what an application's goroutine leak check reported: goleak's
// VerifyTestMain, and a check run inside the m given to Main alike. Not
// parallel, so that no other test is making a database meanwhile.
func TestPostgresServerHoldsNoGoroutine(t *testing.T) {
	t.Run("database", func(t *testing.T) { couriertest.PostgresURL(t) })
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "created by github.com/courier-go/courier/internal/pgtest.") {
			t.Fatalf("a goroutine the kit started runs between tests:\n%s", g)
		}
	}
}
