package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// testSettleBatch settles many outcomes in one call, as the worker does
// with the attempts that finish together: each applies or is refused on
// its own lease, each is logged, and failures of one endpoint in the same
// batch count one after the other against its breaker.
func testSettleBatch(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 10, Cooldown: time.Minute, DisableAfter: 24 * time.Hour}})
	const flaky = "https://flaky.example/h"
	for _, id := range []string{"ok-1", "ok-2", "retry-1", "retry-2", "fail-1", "stale-1"} {
		p := delivery(id)
		if id == "retry-1" || id == "retry-2" {
			p.Endpoint = flaky
		}
		b.enqueue(t, p)
	}
	claimed := map[string]protocol.Claimed{}
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		claimed[c.NotificationID] = c
	}
	if len(claimed) != 6 {
		t.Fatalf("claimed %d, want 6", len(claimed))
	}
	stale := claimed["stale-1"].Lease
	stale.Token = "someone-elses-token"
	outcomes := []protocol.Outcome{
		{Lease: claimed["ok-1"].Lease, Result: protocol.Succeeded, AckSHA256: digest("ack-1"), HTTPStatus: 200},
		{Lease: claimed["retry-1"].Lease, Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503},
		{Lease: stale, Result: protocol.Succeeded},
		{Lease: claimed["fail-1"].Lease, Result: protocol.Failed, Code: courier.CodeAckInvalid, HTTPStatus: 200},
		{Lease: claimed["retry-2"].Lease, Result: protocol.Retry, Code: courier.CodeTimeout},
		{Lease: claimed["ok-2"].Lease, Result: protocol.Succeeded, AckSHA256: ""},
		// The same delivery twice: the second finds the lease already used.
		{Lease: claimed["ok-1"].Lease, Result: protocol.Failed, Code: courier.CodeAckInvalid},
	}
	got, err := b.proto().Settle(b.ctx, outcomes...)
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	want := []struct {
		status   courier.Status
		code     courier.Code
		leaseErr bool
	}{
		{courier.StatusSucceeded, "", false},
		{courier.StatusRetryWait, courier.CodeReceiverUnavailable, false},
		{"", "", true},
		{courier.StatusFailed, courier.CodeAckInvalid, false},
		{courier.StatusRetryWait, courier.CodeTimeout, false},
		{courier.StatusSucceeded, "", false},
		{"", "", true},
	}
	if len(got) != len(want) {
		t.Fatalf("Settle returned %d results for %d outcomes", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if w.leaseErr {
			if !errors.Is(g.Err, courier.CodeLeaseLost) {
				t.Errorf("outcome %d: %+v, want lease lost", i, g)
			}
			continue
		}
		if g.Err != nil || g.Status != w.status || g.Code != w.code {
			t.Errorf("outcome %d: %+v, want %s %q", i, g, w.status, w.code)
		}
	}

	for id, want := range map[string]struct {
		status  courier.Status
		outcome string
		code    courier.Code
		http    int
	}{
		"ok-1":    {courier.StatusSucceeded, "succeeded", "", 200},
		"ok-2":    {courier.StatusSucceeded, "succeeded", "", 0},
		"retry-1": {courier.StatusRetryWait, "retry", courier.CodeReceiverUnavailable, 503},
		"retry-2": {courier.StatusRetryWait, "retry", courier.CodeTimeout, 0},
		"fail-1":  {courier.StatusFailed, "failed", courier.CodeAckInvalid, 200},
		"stale-1": {courier.StatusLeased, "", "", 0},
	} {
		c := claimed[id]
		if d := b.get(t, c.DeliveryID); d.Status != want.status {
			t.Errorf("%s is %s, want %s", id, d.Status, want.status)
		}
		attempts, err := b.store.Outbox.Attempts(b.ctx, c.DeliveryID)
		if err != nil {
			t.Fatal(err)
		}
		if want.outcome == "" {
			if len(attempts) != 0 {
				t.Errorf("%s: %d attempts logged for a refused outcome", id, len(attempts))
			}
			continue
		}
		if len(attempts) != 1 {
			t.Fatalf("%s: %d attempts logged, want 1", id, len(attempts))
		}
		a := attempts[0]
		if string(a.Outcome) != want.outcome || a.ErrorCode != want.code || a.HTTPStatus != want.http || a.Attempt != 1 || a.Owner != "w" {
			t.Errorf("%s: attempt %+v, want %s %q %d", id, a, want.outcome, want.code, want.http)
		}
	}
	if d := b.get(t, claimed["ok-1"].DeliveryID); d.AckSHA256 != digest("ack-1") {
		t.Errorf("ok-1 ack digest %q", d.AckSHA256)
	}
	// Two failures of the flaky endpoint in one batch count twice.
	eh, err := b.store.Endpoints.Get(b.ctx, flaky)
	if err != nil || eh.ConsecutiveFailures != 2 || eh.State != store.EndpointClosed {
		t.Errorf("flaky endpoint %+v, %v: want closed with 2 consecutive failures", eh, err)
	}
}

// testRelease gives back leases never used: the deliveries are due again
// with their attempt uncounted, a retried one keeps its error code, and a
// stale or already-settled lease is left alone, as is one whose token no
// claim could have handed out (a NUL, invalid UTF-8: on PostgreSQL they
// would fail the whole release).
func testRelease(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, id := range []string{"fresh", "retried", "settled"} {
		b.enqueue(t, delivery(id))
	}
	first := map[string]protocol.Claimed{}
	for _, c := range b.claim(t, "w", 10, time.Hour) {
		first[c.NotificationID] = c
	}
	if err := b.retry(first["retried"].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute) // the retry is due (backoff capped at a minute); the leases hold
	claimed := map[string]protocol.Claimed{"fresh": first["fresh"], "settled": first["settled"]}
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		claimed[c.NotificationID] = c
	}
	if got := claimed["retried"].Attempt; got != 2 {
		t.Fatalf("retried delivery claimed at attempt %d, want 2", got)
	}
	if err := b.complete(claimed["settled"].Lease, ""); err != nil {
		t.Fatal(err)
	}
	stale := claimed["fresh"].Lease
	stale.Token = "not-the-token"
	withNUL, notText := claimed["retried"].Lease, claimed["retried"].Lease
	withNUL.Token += nul
	notText.Token += notUTF8
	if n, err := b.proto().Release(b.ctx, withNUL, notText); err != nil || n != 0 {
		t.Fatalf("Release of malformed tokens = %d, %v; want none released", n, err)
	}

	n, err := b.proto().Release(b.ctx, claimed["fresh"].Lease, claimed["retried"].Lease, claimed["settled"].Lease, stale, withNUL, notText)
	if err != nil || n != 2 {
		t.Fatalf("Release = %d, %v; want 2 released", n, err)
	}
	for id, want := range map[string]struct {
		status   courier.Status
		attempts int
		code     courier.Code
	}{
		"fresh":   {courier.StatusPending, 0, ""},
		"retried": {courier.StatusRetryWait, 1, courier.CodeReceiverUnavailable},
		"settled": {courier.StatusSucceeded, 1, ""},
	} {
		d := b.get(t, claimed[id].DeliveryID)
		if d.Status != want.status || d.Attempts != want.attempts || d.LastErrorCode != want.code || d.LeaseOwner != "" {
			t.Errorf("%s after Release: status %s, attempts %d, code %q, owner %q; want %s, %d, %q, none",
				id, d.Status, d.Attempts, d.LastErrorCode, d.LeaseOwner, want.status, want.attempts, want.code)
		}
	}
	// Released deliveries are claimed again at once, at the attempt the
	// released claim had.
	again := map[string]protocol.Claimed{}
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		again[c.NotificationID] = c
	}
	if len(again) != 2 || again["fresh"].Attempt != 1 || again["retried"].Attempt != 2 {
		t.Errorf("claimed after Release: %d rows (fresh attempt %d, retried attempt %d), want 2 at attempts 1 and 2",
			len(again), again["fresh"].Attempt, again["retried"].Attempt)
	}
}

// testRemoteCodeIsKept: the receiver's own code an outcome carries is
// recorded on its attempt and, as the latest, on the delivery (get and
// list); an attempt without one clears the delivery's, a redrive clears
// it, and a code that is not one is refused with nothing written.
func testRemoteCodeIsKept(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	e := b.enqueue(t, delivery("remote"))
	c := b.claim(t, "w", 1, time.Minute)
	invalid := protocol.Outcome{Lease: c[0].Lease, Result: protocol.Retry, Code: courier.CodeReceiverRejected, RemoteCode: "Plan Unknown"}
	if err := b.settle(invalid); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("Settle with an invalid remote code = %v, want invalid_argument", err)
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusLeased || d.LastRemoteCode != "" {
		t.Fatalf("after a refused settle: %s, remote code %q", d.Status, d.LastRemoteCode)
	}
	if err := b.settle(protocol.Outcome{Lease: c[0].Lease, Result: protocol.Retry, Code: courier.CodeReceiverRejected,
		HTTPStatus: 422, RemoteCode: "plan_unknown", RetryDelay: time.Second}); err != nil {
		t.Fatal(err)
	}
	if d := b.get(t, e.ID); d.LastRemoteCode != "plan_unknown" || d.LastErrorCode != courier.CodeReceiverRejected || d.LastHTTPStatus != 422 {
		t.Fatalf("after a refusal: code %q, remote %q, HTTP %d", d.LastErrorCode, d.LastRemoteCode, d.LastHTTPStatus)
	}
	page, err := b.store.Outbox.List(b.ctx, store.ListParams{})
	if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].LastRemoteCode != "plan_unknown" {
		t.Fatalf("List = %+v, %v; want the remote code", page, err)
	}

	b.clock.Advance(time.Minute)
	c = b.claim(t, "w", 1, time.Minute)
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503}); err != nil {
		t.Fatal(err)
	}
	if d := b.get(t, e.ID); d.LastRemoteCode != "" {
		t.Fatalf("an answer without a code left remote code %q", d.LastRemoteCode)
	}

	b.clock.Advance(time.Hour)
	c = b.claim(t, "w", 1, time.Minute)
	if err := b.settle(protocol.Outcome{Lease: c[0].Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected,
		HTTPStatus: 400, RemoteCode: "validation_failed"}); err != nil {
		t.Fatal(err)
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusFailed || d.LastRemoteCode != "validation_failed" {
		t.Fatalf("after a failure: %s, remote %q", d.Status, d.LastRemoteCode)
	}
	attempts, err := b.store.Outbox.Attempts(b.ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []courier.Code
	for _, a := range attempts {
		got = append(got, a.RemoteCode)
	}
	if want := []courier.Code{"plan_unknown", "", "validation_failed"}; !slices.Equal(got, want) {
		t.Fatalf("attempts' remote codes %q, want %q", got, want)
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: e.ID}); n != 1 || err != nil {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	if d := b.get(t, e.ID); d.LastRemoteCode != "" || d.LastErrorCode != "" {
		t.Fatalf("redriven delivery keeps code %q, remote %q", d.LastErrorCode, d.LastRemoteCode)
	}
}
