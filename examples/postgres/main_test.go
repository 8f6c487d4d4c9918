package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/testmain"

	"github.com/courier-go/courier/internal/pgtest"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// TestRun runs the example twice on one database: the second run delivers
// its own notifications and is not confused by the first's.
func TestRun(t *testing.T) {
	url := pgtest.URL(t)
	for i := range 2 {
		var out bytes.Buffer
		ok, err := run(t.Context(), options{url: url, addr: "127.0.0.1:0", n: 300, batch: 40, timeout: time.Minute}, &out)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		if !ok || !strings.Contains(out.String(), "verdict: OK") {
			t.Fatalf("run %d did not succeed:\n%s", i, out.String())
		}
		t.Logf("run %d:\n%s", i, out.String())
	}
}
