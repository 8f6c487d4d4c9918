package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/opsjson"
)

// Environment of TestDeliveriesShowPrintsUTC's child process.
const (
	showDBEnv  = "COURIER_TEST_SHOW_DB"
	showOutEnv = "COURIER_TEST_SHOW_OUT"
)

// TestDeliveriesShowPrintsUTC: show prints the admin API's JSON form of
// a delivery (it printed Go's field names, and durations in nanoseconds),
// and every time in UTC, as list does, on a machine whose zone is not UTC: it printed them in the
// machine's zone, the zone the store reads its times in. A process takes
// its zone from TZ once, so show runs in a child process of this test
// binary under TZ=Asia/Tokyo.
func TestDeliveriesShowPrintsUTC(t *testing.T) {
	if db := os.Getenv(showDBEnv); db != "" { // the child
		if _, offset := time.Now().Zone(); offset == 0 {
			t.Fatalf("TZ=%s: the zone is at UTC's offset, so the test shows nothing", os.Getenv("TZ"))
		}
		out := mustRun(t, exitOK, "deliveries", "show", "-db", db, "1")
		if err := os.WriteFile(os.Getenv(showOutEnv), []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://r.example/hooks")
	failAll(t, s) // an attempt, with the times of its lease
	file := filepath.Join(t.TempDir(), "show.json")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TZ=Asia/Tokyo", showDBEnv+"="+db, showOutEnv+"="+file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("show under TZ=Asia/Tokyo: %v\n%s", err, out)
	}
	out, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var shown opsjson.DeliveryDetail // the admin API's form of a delivery
	if err := json.Unmarshal(out, &shown); err != nil || shown.Delivery.CreatedAt.IsZero() || len(shown.Attempts) != 1 || shown.Attempts[0].FinishedAt.IsZero() ||
		!strings.Contains(string(out), `"notification_id": "n-1"`) {
		t.Fatalf("show printed %s (%v); want the delivery and its attempt", out, err)
	}
	times := regexp.MustCompile(`"(\d{4}-\d\d-\d\dT[^"]*)"`).FindAllStringSubmatch(string(out), -1)
	for _, m := range times {
		if !strings.HasSuffix(m[1], "Z") {
			t.Errorf("show prints %s, not in UTC", m[1])
		}
	}
}
