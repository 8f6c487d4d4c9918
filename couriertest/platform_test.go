package couriertest_test

import (
	"os"
	"os/exec"
	"testing"
)

// TestBuildsOnOtherSystems: an application's tests import couriertest on
// the developer's machine, often macOS or Windows, not only on Linux CI.
// The kit asked the kernel for a parent-death signal, which only Linux
// and FreeBSD have, and ran the server as a Unix user, so it did not
// compile on macOS or Windows at all. Its non-test code needs no cgo, so
// each system is built with CGO_ENABLED=0.
func TestBuildsOnOtherSystems(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package for other systems")
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool to build with: %v", err)
	}
	for _, goos := range []string{"darwin", "windows", "freebsd", "openbsd"} {
		t.Run(goos, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), gotool, "build", "-o", os.DevNull, ".")
			cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("couriertest does not build for %s: %v\n%s", goos, err, out)
			}
		})
	}
}
