package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// TestRedriveBudget: a redrive opens a Store of the tool's own, so a
// redriven delivery gets the budget and horizon -max-attempts and
// -retry-horizon give, the application's Store's, and without them
// store.Config's defaults: 8 more attempts, due within 72 hours.
func TestRedriveBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		flags    []string
		attempts int
		horizon  time.Duration
	}{
		{"the application's", []string{"-max-attempts", "2", "-retry-horizon", "1h"}, 2, time.Hour},
		{"the defaults", nil, 8, 72 * time.Hour},
		{"the shortest horizon", []string{"-retry-horizon", "1s"}, 8, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, s := migrated(t)
			enqueue(t, s, "n-1", "https://r.example/hooks")
			failAll(t, s)
			before := time.Now().Truncate(time.Microsecond) // the store keeps microseconds
			args := append(append([]string{"deliveries", "redrive", "-db", db}, tc.flags...), "1")
			if out := mustRun(t, exitOK, args...); out != "redriven: 1\n" {
				t.Fatalf("redrive printed %q", out)
			}
			after := time.Now()
			d, err := s.Outbox.Get(t.Context(), 1)
			if err != nil || d.Status != courier.StatusPending {
				t.Fatalf("the delivery after redrive: %s, %v; want pending", d.Status, err)
			}
			if more := d.MaxAttempts - d.Attempts; more != tc.attempts {
				t.Errorf("the redriven delivery may make %d more attempts (%d of %d made), want %d", more, d.Attempts, d.MaxAttempts, tc.attempts)
			}
			if d.Deadline.Before(before.Add(tc.horizon)) || d.Deadline.After(after.Add(tc.horizon)) {
				t.Errorf("the redriven delivery's deadline is %s after the redrive, want %s", d.Deadline.Sub(before), tc.horizon)
			}
		})
	}
}

// TestRedriveRefusesABudgetTheStoreWouldNot: -max-attempts and
// -retry-horizon outside what store.Config takes are usage errors, and
// nothing is redriven. So is 0 given: it was taken, as store.Config takes
// it, for the default, a budget the help does not offer (1..1000). So is
// a -retry-horizon under a second, which the store takes but which would
// have the redriven delivery expire before a worker polling at its
// default interval claims it.
func TestRedriveRefusesABudgetTheStoreWouldNot(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://r.example/hooks")
	failAll(t, s)
	for _, flags := range [][]string{
		{"-max-attempts", "-1"},
		{"-max-attempts", "0"},
		{"-max-attempts", "1001"},
		{"-retry-horizon", "0s"},
		{"-retry-horizon", "1ns"},
		{"-retry-horizon", "999ms"},
		{"-retry-horizon", "-1h"},
		{"-retry-horizon", "721h"},
	} {
		args := append(append([]string{"deliveries", "redrive", "-db", db}, flags...), "1")
		code, out, errOut := courierRun(t, args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, flags[0]+" must be") {
			t.Errorf("redrive %v: exit %d, stdout %q, stderr %q; want %d saying what %s must be", flags, code, out, errOut, exitUsage, flags[0])
		}
	}
	if d, err := s.Outbox.Get(t.Context(), 1); err != nil || d.Status != courier.StatusFailed {
		t.Fatalf("the delivery after the refused redrives: %s, %v; want it failed still", d.Status, err)
	}
}

// TestRedriveHelpSaysTheDefaults: redrive's help names its budget flags
// and says what a redrive without them gives.
func TestRedriveHelpSaysTheDefaults(t *testing.T) {
	t.Parallel()
	code, _, errOut := courierRun(t, "deliveries", "redrive", "-h")
	if code != exitOK {
		t.Fatalf("courier deliveries redrive -h: exit %d", code)
	}
	for _, want := range []string{"-max-attempts", "without it: 8", "-retry-horizon", "without it: 72h", "the application's Store's Config"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("courier deliveries redrive -h does not say %q:\n%s", want, errOut)
		}
	}
}

// TestRedriveRefusesTwoEndpoints: -endpoint and -endpoint-ref together
// name two endpoints; redrive refuses them as a usage error and redrives
// neither's deliveries, rather than taking one and dropping the other.
func TestRedriveRefusesTwoEndpoints(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://a.example/hooks")
	enqueue(t, s, "n-2", "https://b.example/hooks")
	failAll(t, s)
	ref := endpoint.Ref("https://b.example/hooks")
	code, out, errOut := courierRun(t, "deliveries", "redrive", "-db", db, "-endpoint", "https://a.example/hooks", "-endpoint-ref", ref)
	if code != exitUsage || out != "" || !strings.Contains(errOut, "-endpoint and -endpoint-ref") {
		t.Errorf("redrive -endpoint A -endpoint-ref B: exit %d, stdout %q, stderr %q; want %d saying to give one of them", code, out, errOut, exitUsage)
	}
	for _, id := range []int64{1, 2} {
		if d, err := s.Outbox.Get(t.Context(), id); err != nil || d.Status != courier.StatusFailed {
			t.Errorf("delivery %d after the refused redrive: %s, %v; want it failed still", id, d.Status, err)
		}
	}
}

// TestRedriveOfOneItDoesNotTakeFails: redrive of a delivery id that it
// does not redrive fails (exit 1, saying why, nothing on stdout), as
// cancel of one it does not cancel does: a script that redrives one
// delivery learns from the exit status whether it was redriven.
func TestRedriveOfOneItDoesNotTakeFails(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://a.example/hooks")
	enqueue(t, s, "n-2", "https://b.example/hooks")
	failAll(t, s)
	enqueue(t, s, "n-3", "https://a.example/hooks") // pending
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a pending delivery", []string{"3"}, "delivery 3 is pending, not failed"},
		{"a failed delivery of another endpoint", []string{"-endpoint", "https://a.example/hooks", "2"}, "delivery 2 is not of the endpoint given"},
	} {
		args := append([]string{"deliveries", "redrive", "-db", db}, tc.args...)
		code, out, errOut := courierRun(t, args...)
		if code != exitFailed || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("redrive of %s: exit %d, stdout %q, stderr %q; want %d saying %q", tc.name, code, out, errOut, exitFailed, tc.want)
		}
	}
	code, out, errOut := courierRun(t, "deliveries", "cancel", "-db", db, "3")
	if code != exitOK {
		t.Fatalf("cancel 3: %d %q %q", code, out, errOut)
	}
	if code, _, _ := courierRun(t, "deliveries", "cancel", "-db", db, "3"); code != exitFailed {
		t.Errorf("cancel of a cancelled delivery: exit %d, want %d", code, exitFailed)
	}
}

// TestRedriveSaysWhatMovedBeforeAFailure: a redrive of an endpoint moves
// its deliveries in batches, each committed on its own; one that fails
// after a batch was committed exits non-zero, saying how many it moved
// (a trigger refuses to move the 201st, in the second batch), so the
// operator knows the rest is to redrive again.
func TestRedriveSaysWhatMovedBeforeAFailure(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	const url = "https://r.example/hooks"
	for i := range 201 {
		enqueue(t, s, "n-"+strconv.Itoa(i), url)
	}
	for range 3 { // each claims 100; Enable closes the circuit the failures opened
		failAll(t, s)
		if err := s.Endpoints.Enable(t.Context(), url); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := s.Outbox.Health(t.Context()); err != nil || h.Failed != 201 {
		t.Fatalf("failed deliveries: %+v, %v; want 201", h, err)
	}
	if _, err := s.DB().ExecContext(t.Context(), `CREATE TRIGGER refuse_redrive BEFORE UPDATE ON courier_outbox
		WHEN OLD.id = 201 AND NEW.status = 'pending' BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := courierRun(t, "deliveries", "redrive", "-db", db, "-endpoint", url)
	if code == exitOK || out != "redriven: 200\n" || !strings.Contains(errOut, "outbox_redrive") {
		t.Fatalf("redrive: exit %d, stdout %q, stderr %q; want a failure, \"redriven: 200\" and the error", code, out, errOut)
	}
	if h, err := s.Outbox.Health(t.Context()); err != nil || h.Failed != 1 {
		t.Fatalf("failed deliveries after the redrive: %+v, %v; want 1", h, err)
	}
}

// TestRedriveRefusedByTheDatabaseIsNoUsageError: a rule of the database's
// (here a trigger) that refuses a redrive's write is no fault of the
// command line: it exits 1, as a failure, not 2, which told the operator
// to fix arguments that were fine.
func TestRedriveRefusedByTheDatabaseIsNoUsageError(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := t.Context()
	enqueue(t, s, "broken", "https://r.example/hooks")
	p := protocol.For(s)
	claimed, err := p.Claim(ctx, protocol.ClaimParams{Owner: "test", Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	if _, err := p.Settle(ctx, protocol.Outcome{Lease: claimed[0].Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: 400}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `CREATE TRIGGER refuse_redrive BEFORE UPDATE ON courier_outbox
		WHEN NEW.status = 'pending' BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`); err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(claimed[0].DeliveryID, 10)
	for _, args := range [][]string{{"deliveries", "redrive", "-db", db, id}, {"deliveries", "redrive", "-db", db, "-endpoint", "https://r.example/hooks"}} {
		if code, _, stderr := courierRun(t, args...); code != exitFailed || !strings.Contains(stderr, string(courier.CodeInternal)) {
			t.Errorf("%v exited %d (%s), want %d with internal_error", args, code, stderr, exitFailed)
		}
	}
}

// TestRedriveOfAnEndpointTheDatabaseDoesNotKnowFails: redrive -endpoint
// with a typo in the URL's path found nothing to move and printed
// "redriven: 0", exit 0, while the endpoint meant kept its failed
// deliveries: the operator, or a script, took it for an endpoint with
// nothing failed. As for -endpoint-ref and endpoints enable, a URL the
// database does not know is a failure that says so. One it knows with
// nothing to redrive is no failure.
func TestRedriveOfAnEndpointTheDatabaseDoesNotKnowFails(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://a.example/hooks")
	failAll(t, s)
	enqueue(t, s, "n-2", "https://b.example/hooks") // known, pending: nothing to redrive
	code, out, errOut := courierRun(t, "deliveries", "redrive", "-db", db, "-endpoint", "https://a.example/hook")
	if code != exitFailed || out != "" || !strings.Contains(errOut, "no endpoint the database knows") {
		t.Errorf("redrive -endpoint of a URL no delivery has: exit %d, stdout %q, stderr %q; want %d saying the database knows no such endpoint", code, out, errOut, exitFailed)
	}
	if code, out, errOut := courierRun(t, "deliveries", "redrive", "-db", db, "-endpoint", "https://B.example:443/hooks"); code != exitOK || out != "redriven: 0\n" {
		t.Errorf("redrive -endpoint of a known endpoint with nothing failed: exit %d, %q, %q; want 0, redriven: 0", code, out, errOut)
	}
	if code, out, errOut := courierRun(t, "deliveries", "redrive", "-db", db, "-endpoint", "https://a.example/hooks"); code != exitOK || out != "redriven: 1\n" {
		t.Errorf("redrive -endpoint of the failed one's: exit %d, %q, %q; want redriven: 1", code, out, errOut)
	}
}

// TestRedriveIntoADisabledEndpointSaysItWaits: a redrive of a delivery
// whose endpoint is disabled (a 410 Gone, an operator's Disable) moves it
// back to pending, where it waits, unsent, until the endpoint is enabled;
// the command said only "redriven: 1". It still does, and warns on
// stderr of the wait and of how to end it; one to an endpoint that is
// not disabled gets no warning.
func TestRedriveIntoADisabledEndpointSaysItWaits(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	const off, on = "https://off.example/hooks", "https://on.example/hooks"
	id := func(n, url string) string {
		e, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{NotificationID: n, Endpoint: url, Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(e.ID, 10)
	}
	first, onID := id("n-1", off), id("n-2", on)
	id("n-3", off)
	failAll(t, s)
	if err := s.Endpoints.Disable(t.Context(), off); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{first}, {"-endpoint", off}, {onID}} {
		code, out, errOut := courierRun(t, append([]string{"deliveries", "redrive", "-db", db}, args...)...)
		warned := strings.Contains(errOut, "is disabled") && strings.Contains(errOut, "courier endpoints enable")
		if code != exitOK || out != "redriven: 1\n" || warned != (args[0] != onID) {
			t.Errorf("redrive %v: exit %d, stdout %q, stderr %q; want redriven: 1, and a warning only for the disabled endpoint", args, code, out, errOut)
		}
	}
}

// TestRedriveOfNothingIntoADisabledEndpointWarnsOfNothing: a redrive of a
// disabled endpoint that moves nothing ("redriven: 0") has nothing
// waiting for the endpoint to be enabled, and says nothing of a wait.
func TestRedriveOfNothingIntoADisabledEndpointWarnsOfNothing(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	const off = "https://off.example/hooks"
	enqueue(t, s, "n-1", off) // known, pending: nothing to redrive
	if err := s.Endpoints.Disable(t.Context(), off); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := courierRun(t, "deliveries", "redrive", "-db", db, "-endpoint", off)
	if code != exitOK || out != "redriven: 0\n" || errOut != "" {
		t.Errorf("redrive -endpoint of a disabled endpoint with nothing failed: exit %d, stdout %q, stderr %q; want redriven: 0 and no warning", code, out, errOut)
	}
}
