package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// check runs Outbox.Check.
func check(t *testing.T, b *bundle, maxRows int) store.Health {
	t.Helper()
	h, err := b.store.Outbox.Check(b.ctx, maxRows)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return h
}

// testCheckFindsWhatClaimsHaveNotTouched: a payload altered in a row no
// claim has reached yet is invisible to Health and found by Check, which
// validates MaxRows deliveries per call and covers the outbox over
// successive calls; a delivery that can no longer be sent (succeeded) is
// not held to its payload.
func testCheckFindsWhatClaimsHaveNotTouched(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var ids []int64
	for i := range 5 {
		ids = append(ids, b.enqueue(t, delivery(fmt.Sprintf("c-%d", i))).ID)
	}
	if h := check(t, b, 0); h.Status != store.HealthOK || h.Checked != 5 || len(h.Invalid) != 0 {
		t.Fatalf("Check of a sound outbox = %s/%s checked %d invalid %v, want ok, 5, none", h.Status, h.Code, h.Checked, h.Invalid)
	}
	// The first delivery succeeds; then two payloads are altered.
	c := b.claim(t, "w", 1, time.Minute)
	if err := b.complete(c[0].Lease, "ack"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{ids[0], ids[3]} {
		b.alterPayload(t, id, []byte(`{"altered":true}`))
	}
	if h := health(t, b); h.Status != store.HealthOK {
		t.Fatalf("Health = %s/%s: it was not meant to read payloads", h.Status, h.Code)
	}
	var found []int64
	for call, want := range []struct {
		checked int
		code    courier.Code
	}{{2, ""}, {2, courier.CodeIntegrity}, {1, ""}, {2, ""}} {
		h := check(t, b, 2)
		if h.Checked != want.checked || h.Code != want.code || (want.code != "") != (h.Status == store.HealthBlocked) {
			t.Fatalf("Check %d = %s/%s checked %d invalid %v, want %q after %d", call+1, h.Status, h.Code, h.Checked, h.Invalid, want.code, want.checked)
		}
		found = append(found, h.Invalid...)
	}
	if !slices.Equal(found, []int64{ids[3]}) {
		t.Fatalf("Check found %v, want only the pending delivery %d (the succeeded one is never sent again)", found, ids[3])
	}
	if d := b.get(t, ids[3]); d.Status != courier.StatusPending {
		t.Fatalf("Check changed the row to %s: it only reports", d.Status)
	}
	// A slice that ends exactly at the end of the outbox starts the next
	// call over: no call validates nothing.
	b.enqueue(t, delivery("c-5"))
	for call := range 6 {
		if h := check(t, b, 3); h.Checked == 0 {
			t.Fatalf("Check %d of 6 rows by 3 validated none", call+1)
		}
	}
	for _, n := range []int{-1, 100_001} {
		if _, err := b.store.Outbox.Check(b.ctx, n); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Fatalf("Check(MaxRows %d) = %v, want invalid_argument", n, err)
		}
	}
}

// testSchemaAlteredStopsClaims: a schema altered after Open stops claims
// with code schema_altered, leasing nothing, and Check reports it; once the
// schema is as courier made it again, claims resume. SQLite notices at the
// next claim, PostgreSQL within engine.SchemaRecheck (seconds): the clock
// is moved a minute on to cover both.
func testSchemaAlteredStopsClaims(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	e := b.enqueue(t, delivery("guarded"))
	if _, err := b.db.ExecContext(b.ctx, "ALTER TABLE courier_outbox ADD COLUMN surprise INTEGER"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	for range 2 { // and again: the verdict holds until the schema changes
		c, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
		if courier.CodeOf(err) != courier.CodeSchemaAltered || !errors.Is(err, courier.CodeSchemaAltered) || len(c) != 0 {
			t.Fatalf("Claim on an altered schema = %d rows, %v; want none, schema_altered", len(c), err)
		}
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusPending || d.Attempts != 0 {
		t.Fatalf("row is %s with %d attempts, want pending and untouched", d.Status, d.Attempts)
	}
	if h := check(t, b, 0); h.Status != store.HealthBlocked || h.Code != courier.CodeSchemaAltered || h.Counts[courier.StatusPending] != 1 {
		t.Fatalf("Check on an altered schema = %s/%s counts %v, want blocked/schema_altered with the counts", h.Status, h.Code, h.Counts)
	}
	if _, err := b.db.ExecContext(b.ctx, "ALTER TABLE courier_outbox DROP COLUMN surprise"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 1 || c[0].DeliveryID != e.ID {
		t.Fatalf("claim after the schema was restored = %+v, want the delivery", c)
	}
	if h := check(t, b, 0); h.Status != store.HealthOK {
		t.Fatalf("Check after the schema was restored = %s/%s", h.Status, h.Code)
	}
}

// testCheck runs the deep check's store tests.
func testCheck(t *testing.T, open OpenFunc) {
	for name, fn := range map[string]func(*testing.T, OpenFunc){
		"FindsWhatClaimsHaveNotTouched": testCheckFindsWhatClaimsHaveNotTouched,
		"SchemaAlteredStopsClaims":      testSchemaAlteredStopsClaims,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open)
		})
	}
}

// testCheckAfterAClockStepBack: a row stamped updated before it was
// created, the store's clock having stepped back between the two (an NTP
// step; on PostgreSQL, two processes' estimates of the server's clock),
// is a valid row, not one altered behind courier's back.
func testCheckAfterAClockStepBack(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	first := b.enqueue(t, keyed("n-1", "k"))
	c := b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 || c[0].DeliveryID != first.ID {
		t.Fatalf("claimed %v, want n-1", ids(c))
	}
	b.clock.Advance(time.Second)
	second := b.enqueue(t, keyed("n-2", "k"))
	b.clock.Advance(-1500 * time.Millisecond) // the clock steps back
	if err := b.complete(c[0].Lease, "a"); err != nil {
		t.Fatal(err)
	}
	if d := b.get(t, second.ID); !d.UpdatedAt.Before(d.CreatedAt) {
		t.Fatalf("n-2 was created %s and updated %s: the test needs it stamped updated before created", d.CreatedAt, d.UpdatedAt)
	}
	h, err := b.store.Outbox.Check(b.ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != store.HealthOK || len(h.Invalid) != 0 {
		t.Fatalf("Check = %s/%s, invalid %v: want ok", h.Status, h.Code, h.Invalid)
	}
}
