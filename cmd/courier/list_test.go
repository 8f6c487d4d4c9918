package main

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
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

// TestDeliveriesListShowsTheReceiversCode: a delivery the receiver
// refused with a problem+json code of its own (handler.Reject's
// plan_unknown) listed courier's code alone (receiver_rejected), where
// show and the admin page have the receiver's too. list has a REMOTE CODE
// column beside LAST ERROR, "-" when the receiver sent none.
func TestDeliveriesListShowsTheReceiversCode(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://r.example/hooks")
	p := protocol.For(s)
	claimed, err := p.Claim(t.Context(), protocol.ClaimParams{Owner: "test", Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	settled, err := p.Settle(t.Context(), protocol.Outcome{Lease: claimed[0].Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected,
		HTTPStatus: 422, RemoteCode: "plan_unknown"})
	if err != nil || settled[0].Err != nil {
		t.Fatalf("settle: %v, %v", err, settled)
	}
	enqueue(t, s, "n-2", "https://r.example/hooks")

	out := mustRun(t, exitOK, "deliveries", "list", "-db", db)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := regexp.MustCompile(`\s{2,}`).Split(lines[0], -1) // the column names, which hold single spaces
	if want := []string{"ID", "STATUS", "ATTEMPTS", "NOTIFICATION", "ENDPOINT", "ENDPOINT REF", "LAST ERROR", "REMOTE CODE", "UPDATED"}; !slices.Equal(header, want) {
		t.Fatalf("list's columns: %q, want %q", header, want)
	}
	rows := map[string][]string{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		rows[f[3]] = f
	}
	if got := rows["n-1"]; len(got) != 9 || got[6] != "receiver_rejected" || got[7] != "plan_unknown" {
		t.Errorf("list's row of the refused delivery: %q, want LAST ERROR receiver_rejected and REMOTE CODE plan_unknown", got)
	}
	if got := rows["n-2"]; len(got) != 9 || got[6] != "-" || got[7] != "-" {
		t.Errorf("list's row of the pending delivery: %q, want - and -", got)
	}
}

// TestDeliveriesListFindsANotification: an operator handed a notification
// id (by a customer, a receiver's log) could find its deliveries on the
// admin page's search and API, but list had no such filter: only a walk
// page by page through every delivery. -notification-id lists that
// notification's deliveries, one per endpoint.
func TestDeliveriesListFindsANotification(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://r.example/hooks")
	enqueue(t, s, "n-2", "https://r.example/hooks")
	enqueue(t, s, "n-1", "https://q.example/hooks")
	code, out, errOut := courierRun(t, "deliveries", "list", "-db", db, "-notification-id", "n-1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 3 || strings.Contains(out, "n-2") {
		t.Fatalf("list -notification-id n-1: exit %d, %q, stderr %q; want its two deliveries", code, out, errOut)
	}
	if code, _, errOut := courierRun(t, "deliveries", "list", "-db", db, "-notification-id", "not an id"); code != exitUsage || errOut == "" {
		t.Fatalf("list -notification-id of a bad id: exit %d, stderr %q; want %d", code, errOut, exitUsage)
	}
}
