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
	"github.com/courier-go/courier/store"
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
	if want := listColumns; !slices.Equal(header, want) {
		t.Fatalf("list's columns: %q, want %q", header, want)
	}
	rows := listRows(t, out)
	if got := rows["n-1"]; got["LAST ERROR"] != "receiver_rejected" || got["REMOTE CODE"] != "plan_unknown" {
		t.Errorf("list's row of the refused delivery: %q, want LAST ERROR receiver_rejected and REMOTE CODE plan_unknown", got)
	}
	if got := rows["n-2"]; got["LAST ERROR"] != "-" || got["REMOTE CODE"] != "-" {
		t.Errorf("list's row of the pending delivery: %q, want - and -", got)
	}
}

// listColumns are the columns of deliveries list, in order.
var listColumns = []string{"ID", "STATUS", "HELD", "ATTEMPTS", "NOTIFICATION", "ENDPOINT", "ENDPOINT REF", "LAST ERROR", "REMOTE CODE", "UPDATED"}

// listRows reads the table deliveries list printed, a row by its
// NOTIFICATION, each cell by its column: every cell is one word.
func listRows(t *testing.T, out string) map[string]map[string]string {
	t.Helper()
	rows := map[string]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != len(listColumns) {
			t.Fatalf("list's row %q has %d cells, want one for each of %q", line, len(f), listColumns)
		}
		row := map[string]string{}
		for i, c := range listColumns {
			row[c] = f[i]
		}
		rows[row["NOTIFICATION"]] = row
	}
	return rows
}

// TestDeliveriesListSaysWhyAWaitingDeliveryIsHeld: a delivery waiting
// behind the failed head of its ordering key listed as "pending 0/1", as
// one about to be sent; only show said "held": "key". list has a HELD
// column: key for one behind its ordering key, endpoint for one waiting
// for room at its endpoint (its limits), "-" for one that is not held.
func TestDeliveriesListSaysWhyAWaitingDeliveryIsHeld(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := t.Context()
	const keyed, limited = "https://k.example/hooks", "https://l.example/hooks"
	for _, n := range []string{"k-1", "k-2"} {
		if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: n, Endpoint: keyed, Payload: []byte(`{}`), OrderingKey: "order-7"}); err != nil {
			t.Fatal(err)
		}
	}
	failAll(t, s) // k-1, the key's head, fails and holds the key
	if err := s.Endpoints.SetLimits(ctx, limited, store.Limits{MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, "l-1", limited)
	enqueue(t, s, "l-2", limited)
	claimed, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %d, %v; want one of the limited endpoint's two", len(claimed), err)
	}
	rows := listRows(t, mustRun(t, exitOK, "deliveries", "list", "-db", db))
	for n, want := range map[string]struct{ status, held string }{
		"k-1": {"failed", "-"}, "k-2": {"pending", "key"},
		claimed[0].NotificationID: {"leased", "-"}, map[string]string{"l-1": "l-2", "l-2": "l-1"}[claimed[0].NotificationID]: {"pending", "endpoint"},
	} {
		if got := rows[n]; got["STATUS"] != want.status || got["HELD"] != want.held {
			t.Errorf("list's row of %s: %q, want STATUS %s and HELD %s", n, got, want.status, want.held)
		}
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
