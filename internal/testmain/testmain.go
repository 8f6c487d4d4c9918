// Package testmain is the TestMain of courier's own test packages: it runs
// the tests, stops the throwaway PostgreSQL server they may have started,
// and then, when the tests passed, fails the run if any goroutine they
// started is still running (goleak). It is apart from internal/pgtest so
// that couriertest, which users' tests import, does not bring goleak
// with it.
package testmain

import (
	"fmt"
	"os"

	"go.uber.org/goleak"

	"github.com/courier-go/courier/internal/pgtest"
)

// Main runs m's tests as described above and exits. Use it from TestMain:
//
//	func TestMain(m *testing.M) { testmain.Main(m) }
func Main(m interface{ Run() int }) {
	code := pgtest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
