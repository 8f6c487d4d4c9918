package main

import (
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
)

// TestCancelEndpointUnblocksHealth: an endpoint gone for good and
// disabled keeps health blocked (exit 3) while it has deliveries waiting
// or failed; deliveries cancel -endpoint (or -endpoint-ref) cancels every
// one of them at once, says how many, and health is ok again (exit 0).
// Another endpoint's delivery is left waiting.
func TestCancelEndpointUnblocksHealth(t *testing.T) {
	t.Parallel()
	const gone, other = "https://gone.example/hooks", "https://other.example/hooks"
	for _, flag := range []struct{ name, value string }{{"-endpoint", gone}, {"-endpoint-ref", endpoint.Ref(gone)}} {
		t.Run(flag.name, func(t *testing.T) {
			t.Parallel()
			db, s := migrated(t)
			enqueue(t, s, "n-1", gone)
			failAll(t, s)
			enqueue(t, s, "n-2", gone)
			enqueue(t, s, "n-3", gone)
			mustRun(t, exitOK, "endpoints", "disable", "-db", db, gone)
			enqueue(t, s, "n-4", other)
			mustRun(t, exitBlocked, "health", "-db", db)
			if out := mustRun(t, exitOK, "deliveries", "cancel", "-db", db, flag.name, flag.value); out != "cancelled: 3\n" {
				t.Fatalf("deliveries cancel %s printed %q, want %q", flag.name, out, "cancelled: 3\n")
			}
			mustRun(t, exitOK, "health", "-db", db)
			for id, want := range map[int64]courier.Status{1: courier.StatusSuppressed, 2: courier.StatusSuppressed, 3: courier.StatusSuppressed, 4: courier.StatusPending} {
				if d, err := s.Outbox.Get(t.Context(), id); err != nil || d.Status != want {
					t.Errorf("delivery %d after the cancel: %s, %v; want %s", id, d.Status, err, want)
				}
			}
			// Nothing left to cancel is no failure.
			if out := mustRun(t, exitOK, "deliveries", "cancel", "-db", db, flag.name, flag.value); out != "cancelled: 0\n" {
				t.Fatalf("deliveries cancel %s again printed %q, want %q", flag.name, out, "cancelled: 0\n")
			}
		})
	}
}

// TestCancelEndpointRefusals: an id with an endpoint flag, or both
// endpoint flags, are usage errors (exit 2); an endpoint the database
// does not know, by URL (a typo) or ref, is a failure that says so (exit
// 1), as it is for redrive. Nothing is cancelled.
func TestCancelEndpointRefusals(t *testing.T) {
	t.Parallel()
	const url = "https://gone.example/hooks"
	db, s := migrated(t)
	enqueue(t, s, "n-1", url)
	ref := endpoint.Ref(url)
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"-endpoint", url, "1"}, exitUsage, "not both"},
		{[]string{"-endpoint-ref", ref, "1"}, exitUsage, "not both"},
		{[]string{"-endpoint", url, "-endpoint-ref", ref}, exitUsage, "-endpoint and -endpoint-ref"},
		{[]string{"-endpoint", "https://gone.example/hook"}, exitFailed, "no endpoint the database knows"},
		{[]string{"-endpoint-ref", endpoint.Ref("https://gone.example/hook")}, exitFailed, "no endpoint the database knows"},
		{[]string{"-endpoint", "ftp://gone.example/hooks"}, exitUsage, "-endpoint must be"},
	} {
		args := append([]string{"deliveries", "cancel", "-db", db}, tc.args...)
		code, out, errOut := courierRun(t, args...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.says) {
			t.Errorf("deliveries cancel %v: exit %d, stdout %q, stderr %q; want %d saying %q", tc.args, code, out, errOut, tc.code, tc.says)
		}
	}
	if d, err := s.Outbox.Get(t.Context(), 1); err != nil || d.Status != courier.StatusPending {
		t.Fatalf("the delivery after the refused cancels: %s, %v; want it pending still", d.Status, err)
	}
}
