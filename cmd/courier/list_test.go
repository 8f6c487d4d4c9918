package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestDeliveriesListSaysWhenThereAreMore: list prints a page, the newest
// -limit deliveries (50 by default), and said nothing when more matched:
// 300 failed deliveries listed as 50 looked like all of them, and past
// 1,000 the rest could not be listed at all. When more match, it says so
// on stderr (stdout stays the table), with the -before that lists the next
// page, and -before lists it.
func TestDeliveriesListSaysWhenThereAreMore(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	for i := 1; i <= 3; i++ {
		enqueue(t, s, "n-"+strconv.Itoa(i), "https://r.example/hooks")
	}
	ids := func(table string) []string {
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
			ids = append(ids, strings.Fields(line)[0])
		}
		return ids
	}
	code, out, errOut := courierRun(t, "deliveries", "list", "-db", db, "-limit", "2")
	if got := ids(out); code != exitOK || strings.Join(got, ",") != "3,2" || !strings.Contains(errOut, "-before 2") {
		t.Fatalf("list -limit 2 of 3: exit %d, ids %v, stderr %q; want 3,2 and the -before of the next page", code, got, errOut)
	}
	code, out, errOut = courierRun(t, "deliveries", "list", "-db", db, "-limit", "2", "-before", "2")
	if got := ids(out); code != exitOK || strings.Join(got, ",") != "1" || errOut != "" {
		t.Fatalf("list -before 2: exit %d, ids %v, stderr %q; want 1 alone, nothing more", code, got, errOut)
	}
	if code, out, errOut := courierRun(t, "deliveries", "list", "-db", db); code != exitOK || len(ids(out)) != 3 || errOut != "" {
		t.Fatalf("list of all 3: exit %d, %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := courierRun(t, "deliveries", "list", "-db", db, "-before", "-1"); code != exitUsage || !strings.Contains(errOut, "-before") {
		t.Fatalf("list -before -1: exit %d, stderr %q; want %d naming -before", code, errOut, exitUsage)
	}
}
