package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/jmoiron/sqlx"
)

const sourceEndpoint = "https://source.example/commands"

var (
	digestA = strings.Repeat("a", 64)
	digestB = strings.Repeat("b", 64)
)

// command returns a command's payload.
func command(t *testing.T, op, requestID, capabilities string, sourceMax int, body string) []byte {
	t.Helper()
	c, err := ack.NewCommand(ack.Command{
		Operation: op, RequestID: requestID, SourceMaxAttempts: sourceMax,
		CapabilitiesSHA256: capabilities, Body: json.RawMessage(body),
	})
	if err != nil {
		t.Fatalf("NewCommand: %v", err)
	}
	b, err := c.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bundle) enqueueCommand(t *testing.T, p store.CommandParams) (store.Enqueued, error) {
	t.Helper()
	return inCommitted(t, b, func(tx *sqlx.Tx) (store.Enqueued, error) { return b.store.Outbox.EnqueueCommand(b.ctx, tx, p) })
}

func (b *bundle) mustEnqueueCommand(t *testing.T, p store.CommandParams) store.Enqueued {
	t.Helper()
	e, err := b.enqueueCommand(t, p)
	if err != nil {
		t.Fatalf("EnqueueCommand: %v", err)
	}
	return e
}

// testCommandPriority: removals are claimed before changes enqueued
// earlier; within a class, oldest first.
func testCommandPriority(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var order []string
	for _, c := range []struct{ op, id string }{
		{"change", "c1"}, {"change", "c2"}, {"tombstone", "t1"}, {"cancellation", "x1"}, {"change", "c3"}, {"tombstone", "t2"},
	} {
		body := `{"n":1}`
		if c.op != "change" {
			body = "null"
		}
		e := b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, c.op, c.id, digestA, 5, body)})
		d := b.get(t, e.ID)
		wantPriority := 0 // changes
		if c.op != "change" {
			wantPriority = -1 // removals
		}
		if d.NotificationID != c.op+":"+c.id || d.Profile != ack.ProfileCommand || d.Priority != wantPriority || d.MaxAttempts != 5 {
			t.Fatalf("enqueued %+v", d)
		}
		b.clock.Advance(time.Second)
	}
	for {
		c := b.claim(t, "w", 1, time.Minute)
		if len(c) == 0 {
			break
		}
		order = append(order, c[0].NotificationID)
		if err := b.complete(c[0].Lease, "ack"); err != nil {
			t.Fatal(err)
		}
	}
	want := "tombstone:t1 cancellation:x1 tombstone:t2 change:c1 change:c2 change:c3"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("claim order = %s, want %s", got, want)
	}
}

// testCommandIdempotent: the same command again is a no-op; the same
// identity with another body, another source budget or another delivery
// budget is a collision, and the stored row is unchanged.
func testCommandIdempotent(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	p := store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r1", digestA, 5, `{"title":"x"}`), MaxAttempts: 4}
	first := b.mustEnqueueCommand(t, p)
	again := b.mustEnqueueCommand(t, p)
	if !again.Existed || again.ID != first.ID {
		t.Fatalf("same command = %+v, want the existing row %d", again, first.ID)
	}
	before := b.get(t, first.ID)
	otherBody, otherSource, otherDelivery := p, p, p
	otherBody.Payload = command(t, "change", "r1", digestA, 5, `{"title":"y"}`)
	otherSource.Payload = command(t, "change", "r1", digestA, 6, `{"title":"x"}`)
	otherDelivery.MaxAttempts = 5
	for name, q := range map[string]store.CommandParams{"body": otherBody, "source_max_attempts": otherSource, "delivery budget": otherDelivery} {
		if _, err := b.enqueueCommand(t, q); !errors.Is(err, courier.CodeIdempotencyCollision) {
			t.Fatalf("other %s: EnqueueCommand = %v, want CodeIdempotencyCollision", name, err)
		}
	}
	if after := b.get(t, first.ID); string(after.Payload) != string(before.Payload) || after.MaxAttempts != 4 || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("row changed after collisions: %+v", after)
	}
	// Another operation with the same request id is another command.
	if e := b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "tombstone", "r1", digestA, 5, "null")}); e.Existed {
		t.Fatal("tombstone:r1 reported as existing")
	}
}

// testCommandValidatedWhole: EnqueueCommand reads the whole command as the
// source will, and refuses with code request_invalid, naming the field
// and never its content, what the source would only refuse as
// receiver_rejected after a delivery: malformed JSON, duplicate keys, a
// missing or unknown member, a bad value, a change without a body.
// Nothing is written, not even the endpoint's pin.
func testCommandValidatedWhole(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	valid := string(command(t, "change", "r1", digestA, 5, `{"title":"secret-title"}`))
	edit := func(old, new string) []byte {
		t.Helper()
		if !strings.Contains(valid, old) {
			t.Fatalf("%q is not in %s", old, valid)
		}
		return []byte(strings.Replace(valid, old, new, 1))
	}
	for name, tc := range map[string]struct {
		payload []byte
		field   string // "" for the document
		rule    string
	}{
		"empty":                  {nil, "", "size"},
		"not JSON":               {[]byte("x"), "", "json"},
		"trailing data":          {[]byte(valid + `{}`), "", "json"},
		"duplicate key":          {edit(`{"body"`, `{"operation":"change","body"`), "", "duplicate_key"},
		"duplicate key in body":  {edit(`{"title":"secret-title"}`, `{"title":"secret-title","title":"y"}`), "", "duplicate_key"},
		"not an object":          {[]byte(`["change"]`), "", "object"},
		"no schema":              {edit(`"schema":"courier.source-command.v1",`, ``), "schema", "required"},
		"no body":                {edit(`"body":{"title":"secret-title"},`, ``), "body", "required"},
		"unknown member":         {edit(`{"body"`, `{"extra":"secret-extra","body"`), "extra", "unknown"},
		"change with null body":  {edit(`{"title":"secret-title"}`, `null`), "body", "required_for_change"},
		"wrong schema":           {edit(`courier.source-command.v1`, `courier.source-command.v2`), "schema", "eq"},
		"unknown operation":      {edit(`"operation":"change"`, `"operation":"delete"`), "operation", "oneof"},
		"operation not a string": {edit(`"operation":"change"`, `"operation":7`), "operation", "type"},
		"request id with space":  {edit(`"request_id":"r1"`, `"request_id":"r 1"`), "request_id", "courier_token"},
		"budget over 20":         {edit(`"source_max_attempts":5`, `"source_max_attempts":21`), "source_max_attempts", "max"},
		"budget not an integer":  {edit(`"source_max_attempts":5`, `"source_max_attempts":5.5`), "source_max_attempts", "integer"},
		"digest upper case":      {edit(digestA, strings.ToUpper(digestA)), "capabilities_sha256", "courier_sha256"},
	} {
		_, err := b.enqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: tc.payload})
		var ve *ack.ValidationError
		switch {
		case courier.CodeOf(err) != courier.CodeRequestInvalid || !errors.Is(err, courier.CodePayloadInvalid):
			t.Errorf("%s: EnqueueCommand = %v, want request_invalid", name, err)
		case !errors.As(err, &ve) || !slices.Contains(ve.Fields, ack.FieldError{Field: tc.field, Rule: tc.rule}):
			t.Errorf("%s: EnqueueCommand = %v, want field %q rule %q named", name, err, tc.field, tc.rule)
		case strings.Contains(err.Error(), "secret"):
			t.Errorf("%s: the error quotes the payload: %v", name, err)
		}
	}
	// A valid command with a key id or endpoint that is not text
	// PostgreSQL stores is refused as invalid_argument on both engines.
	for name, p := range map[string]store.CommandParams{
		"key id with NUL":    {Endpoint: sourceEndpoint, Payload: []byte(valid), KeyID: "k" + nul},
		"key id not UTF-8":   {Endpoint: sourceEndpoint, Payload: []byte(valid), KeyID: "k" + notUTF8},
		"endpoint with NUL":  {Endpoint: sourceEndpoint + nul, Payload: []byte(valid)},
		"endpoint not UTF-8": {Endpoint: sourceEndpoint + notUTF8, Payload: []byte(valid)},
	} {
		if _, err := b.enqueueCommand(t, p); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("%s: EnqueueCommand = %v, want invalid_argument", name, err)
		}
	}
	if _, err := b.store.Contracts.Get(b.ctx, sourceEndpoint); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("a refused command pinned the endpoint's contract: %v", err)
	}
	if h := health(t, b); h.Counts[courier.StatusPending] != 0 {
		t.Fatalf("refused commands wrote %d deliveries", h.Counts[courier.StatusPending])
	}
	if _, err := b.enqueueCommand(t, store.CommandParams{Endpoint: "relative/source", Payload: []byte(valid)}); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("relative endpoint: EnqueueCommand = %v, want invalid_argument", err)
	}
	b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: []byte(valid)})
}

// testContractPinning: re-pinning with deliveries pending holds the
// endpoint back (rows unchanged, health blocked with contract_changed)
// until the operator pins the old digest again or fails the mismatched
// deliveries.
func testContractPinning(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	cmd := b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r1", digestA, 5, `{}`)})
	if k, err := b.store.Contracts.Get(b.ctx, sourceEndpoint); err != nil || k.CapabilitiesSHA256 != digestA {
		t.Fatalf("pin after the first command = %+v, %v; want digest a", k, err)
	}
	plain := b.enqueue(t, store.EnqueueParams{NotificationID: "plain", Endpoint: sourceEndpoint, Payload: []byte(`{}`)})
	other := b.enqueue(t, store.EnqueueParams{NotificationID: "elsewhere", Endpoint: "https://other.example/", Payload: []byte(`{}`)})

	if err := b.store.Contracts.Pin(b.ctx, sourceEndpoint, digestB); err != nil {
		t.Fatalf("Pin: %v", err)
	}
	claimAll := func() map[int64]protocol.Claimed {
		t.Helper()
		got := make(map[int64]protocol.Claimed)
		for _, c := range b.claim(t, "w", 10, time.Minute) {
			got[c.DeliveryID] = c
		}
		return got
	}
	if got := claimAll(); len(got) != 1 || got[other.ID].DeliveryID != other.ID {
		t.Fatalf("claimed %v while the contract changed, want only the other endpoint's row", got)
	} else if err := b.complete(got[other.ID].Lease, "ack"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{cmd.ID, plain.ID} {
		if d := b.get(t, id); d.Status != courier.StatusPending || d.Attempts != 0 {
			t.Fatalf("held-back row %d is %s with %d attempts, want pending untouched", id, d.Status, d.Attempts)
		}
	}
	h, err := b.store.Outbox.Health(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != store.HealthBlocked || h.Code != courier.CodeContractChanged || h.ContractMismatches != 1 {
		t.Fatalf("Health = %s/%s mismatches %d, want blocked/contract_changed 1", h.Status, h.Code, h.ContractMismatches)
	}
	// A new command under the old digest is refused, saying what resolves
	// it; the same one again is a no-op.
	if _, err := b.enqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r2", digestA, 5, `{}`)}); !errors.Is(err, courier.CodeContractChanged) {
		t.Fatalf("command under the old digest = %v, want CodeContractChanged", err)
	} else if !strings.Contains(err.Error(), "Contracts.Pin") || !strings.Contains(err.Error(), "courier contracts pin") {
		t.Errorf("command under the old digest = %q: the error does not say what to do", err)
	}
	if e := b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r1", digestA, 5, `{}`)}); !e.Existed {
		t.Fatal("re-enqueue of a held-back command was not a no-op")
	}

	// Operator re-pins the old digest: claiming resumes.
	if err := b.store.Contracts.Pin(b.ctx, sourceEndpoint, digestA); err != nil {
		t.Fatal(err)
	}
	got := claimAll()
	if len(got) != 2 || got[cmd.ID].DeliveryID == 0 || got[plain.ID].DeliveryID == 0 {
		t.Fatalf("after re-pinning the old digest claimed %v, want the command and the plain row", got)
	}
	if err := b.retry(got[cmd.ID].Lease, retryParams{Code: courier.CodeNetwork}); err != nil {
		t.Fatal(err)
	}
	if err := b.complete(got[plain.ID].Lease, "ack"); err != nil {
		t.Fatal(err)
	}

	// Pinned to b again with the command waiting to retry: held back; the
	// operator fails the mismatched deliveries and claiming resumes.
	if err := b.store.Contracts.Pin(b.ctx, sourceEndpoint, digestB); err != nil {
		t.Fatal(err)
	}
	fresh := b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r3", digestB, 5, `{}`)})
	b.clock.Advance(time.Hour)
	if got := claimAll(); len(got) != 0 {
		t.Fatalf("claimed %v while the contract changed", got)
	}
	n, err := b.store.Contracts.FailMismatched(b.ctx, sourceEndpoint)
	if err != nil || n != 1 {
		t.Fatalf("FailMismatched = %d, %v; want 1", n, err)
	}
	if d := b.get(t, cmd.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeContractChanged {
		t.Fatalf("mismatched row is %s/%s, want failed/contract_changed", d.Status, d.LastErrorCode)
	}
	if got := claimAll(); len(got) != 1 || got[fresh.ID].DeliveryID == 0 {
		t.Fatalf("after FailMismatched claimed %v, want the command under the new digest", got)
	}
	if h, err := b.store.Outbox.Health(b.ctx); err != nil || h.ContractMismatches != 0 || h.Code != courier.CodeFailedPresent {
		t.Fatalf("Health = %+v, %v; want no mismatches, deliveries_failed", h, err)
	}
	// A redrive of the endpoint leaves the command of the old contract
	// failed: sent again, it would hold the endpoint back.
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{Endpoint: sourceEndpoint}); err != nil || n != 0 {
		t.Fatalf("Redrive of the endpoint = %d, %v; want the old contract's command left failed", n, err)
	}
	if h, err := b.store.Outbox.Health(b.ctx); err != nil || h.ContractMismatches != 0 {
		t.Fatalf("after the redrive Health = %+v, %v; want no mismatches", h, err)
	}
	if err := b.store.Contracts.Pin(b.ctx, sourceEndpoint, "nothex"); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("Pin of a bad digest = %v", err)
	}
	if _, err := b.store.Contracts.Get(b.ctx, "https://unpinned.example/"); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("Get of an unpinned endpoint = %v", err)
	}
	// What no command could be enqueued to is refused by every action, as
	// invalid_argument, with nothing pinned or failed.
	for _, endpoint := range []string{"relative/source", sourceEndpoint + nul, sourceEndpoint + notUTF8} {
		if err := b.store.Contracts.Pin(b.ctx, endpoint, digestA); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Pin(%q) = %v, want invalid_argument", endpoint, err)
		}
		if _, err := b.store.Contracts.Get(b.ctx, endpoint); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Get(%q) = %v, want invalid_argument", endpoint, err)
		}
		if _, err := b.store.Contracts.FailMismatched(b.ctx, endpoint); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("FailMismatched(%q) = %v, want invalid_argument", endpoint, err)
		}
	}
	if pins, err := b.store.Contracts.List(b.ctx); err != nil || len(pins) != 1 || pins[0].Endpoint != sourceEndpoint {
		t.Fatalf("Contracts.List = %+v, %v; want the one pin", pins, err)
	}
}

// testCommands runs the source-delivery profile's store tests.
func testCommands(t *testing.T, open OpenFunc) {
	for name, fn := range map[string]func(*testing.T, OpenFunc){
		"Priority": testCommandPriority, "Idempotent": testCommandIdempotent, "ContractPinning": testContractPinning,
		"ValidatedWhole": testCommandValidatedWhole, "HealthCountsOperations": testHealthCountsOperations,
		"ContractsList": testContractsList, "BudgetWithinTheSources": testCommandBudgetWithinTheSources,
		"RemovalGoesBeforeParkedChanges": testRemovalGoesBeforeParkedChanges, "Unpin": testContractUnpin,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open)
		})
	}
}

// testFailMismatchedEndsParkedCommands: commands of the old contract that
// wait parked (their endpoint at its limits, or its worker's share) are
// failed like the others: a failed row holds no place.
func testFailMismatchedEndsParkedCommands(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	if err := b.store.Endpoints.SetLimits(b.ctx, sourceEndpoint, store.Limits{MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", id, digestA, 5, `{}`)})
	}
	if got := b.claim(t, "w", 10, time.Minute); len(got) != 1 {
		t.Fatalf("claimed %v, want one (the others parked)", ids(got))
	}
	if err := b.store.Contracts.Pin(b.ctx, sourceEndpoint, digestB); err != nil {
		t.Fatal(err)
	}
	if n, err := b.store.Contracts.FailMismatched(b.ctx, sourceEndpoint); err != nil || n != 2 {
		t.Fatalf("FailMismatched = %d, %v; want the 2 parked", n, err)
	}
}

// testCommandBudgetWithinTheSources: a command's delivery budget is at
// most its source_max_attempts, since the source refuses every later
// attempt (source_attempts_exhausted): a larger MaxAttempts is refused
// with invalid_argument naming both, and nothing is written, not even the
// endpoint's pin.
func testCommandBudgetWithinTheSources(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	payload := command(t, "change", "r1", digestA, 3, `{"title":"x"}`)
	_, err := b.enqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: payload, MaxAttempts: 4})
	if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "MaxAttempts 4") || !strings.Contains(err.Error(), "source_max_attempts 3") {
		t.Fatalf("MaxAttempts past the source's budget: EnqueueCommand = %v, want invalid_argument naming both", err)
	}
	if h := health(t, b); h.Counts[courier.StatusPending] != 0 {
		t.Fatalf("the refused command wrote %d deliveries", h.Counts[courier.StatusPending])
	}
	if _, err := b.store.Contracts.Get(b.ctx, sourceEndpoint); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("the refused command pinned the endpoint's contract: %v", err)
	}
	e := b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: payload, MaxAttempts: 3})
	if d := b.get(t, e.ID); d.MaxAttempts != 3 {
		t.Fatalf("MaxAttempts equal to the source's budget: delivery budget %d, want 3", d.MaxAttempts)
	}
}

// testRemovalGoesBeforeParkedChanges: a removal enqueued while changes of
// its endpoint wait parked (the endpoint at its limits, or the worker at
// its share of it) is claimed before them, as it is before due ones.
// A claim leases an endpoint's parked deliveries before its due ones, so
// a removal left in the due index waited behind every parked change.
func testRemovalGoesBeforeParkedChanges(t *testing.T, open OpenFunc) {
	for _, tt := range []struct {
		name   string
		limits store.Limits
		cap    int
	}{
		{"worker share", store.Limits{}, 1},
		{"endpoint limit", store.Limits{MaxInFlight: 1}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t, open, store.Config{})
			if tt.limits != (store.Limits{}) {
				if err := b.store.Endpoints.SetLimits(b.ctx, sourceEndpoint, tt.limits); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{"c1", "c2", "c3"} {
				b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", id, digestA, 5, `{}`)})
				b.clock.Advance(time.Second)
			}
			got := b.claimCapped(t, "w", 10, tt.cap)
			if len(got) != 1 {
				t.Fatalf("claimed %v, want one (the others parked)", ids(got))
			}
			b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "tombstone", "t1", digestA, 5, `null`)})
			var order []string
			for lease := got[0].Lease; ; {
				if err := b.complete(lease, "ack"); err != nil {
					t.Fatal(err)
				}
				next := b.claimCapped(t, "w", 10, tt.cap)
				if len(next) == 0 {
					break
				}
				if len(next) != 1 {
					t.Fatalf("claimed %v, want one", ids(next))
				}
				order = append(order, next[0].NotificationID)
				lease = next[0].Lease
			}
			want := "tombstone:t1 change:c2 change:c3"
			if got := strings.Join(order, " "); got != want {
				t.Fatalf("claim order after the first change = %s, want %s", got, want)
			}
		})
	}
}

// testContractUnpin: nothing removed a pin, so that a pin of a URL with a
// typo in it stayed, and made the store know an endpoint no one sends to.
// Unpin removes one, after which the store no longer knows the endpoint by
// it, and the next command enqueued pins its own digest. A pin that holds
// deliveries back (a leased one included) stays, refused as
// contract_changed, until they are resolved; Unpin itself changes no
// delivery.
func testContractUnpin(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	const typo = sourceEndpoint + "s"
	if err := b.store.Contracts.Pin(b.ctx, typo, digestA); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Contracts.Unpin(b.ctx, typo); err != nil {
		t.Fatalf("Unpin of a pin that holds nothing back = %v", err)
	}
	if _, err := b.store.Contracts.Get(b.ctx, typo); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("Get after Unpin = %v, want not_found", err)
	}
	if url, err := b.store.Endpoints.Resolve(b.ctx, endpoint.Ref(typo)); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("Resolve of the unpinned endpoint's ref = %q, %v; want not_found: the store knew it by its pin alone", url, err)
	}
	if err := b.store.Contracts.Unpin(b.ctx, typo); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("Unpin of no pin = %v, want not_found", err)
	}
	for _, bad := range []string{"relative/source", "", sourceEndpoint + nul} {
		if err := b.store.Contracts.Unpin(b.ctx, bad); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Unpin(%q) = %v, want invalid_argument", bad, err)
		}
	}

	// A command under digest a, leased, then the pin changed to b: the
	// leased one holds the endpoint back, and the pin stays.
	first := b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r1", digestA, 5, `{}`)})
	leased := b.claim(t, "w", 10, time.Minute)
	if len(leased) != 1 || leased[0].DeliveryID != first.ID {
		t.Fatalf("claimed %v, want the command", ids(leased))
	}
	if err := b.store.Contracts.Pin(b.ctx, sourceEndpoint, digestB); err != nil {
		t.Fatal(err)
	}
	err := b.store.Contracts.Unpin(b.ctx, sourceEndpoint)
	if !errors.Is(err, courier.CodeContractChanged) || !strings.Contains(err.Error(), "holds back 1 of the endpoint's deliveries") {
		t.Fatalf("Unpin of a pin holding a delivery back = %v, want contract_changed saying how many", err)
	}
	if k, err := b.store.Contracts.Get(b.ctx, sourceEndpoint); err != nil || k.CapabilitiesSHA256 != digestB || k.Mismatched != 1 {
		t.Fatalf("the pin after a refused Unpin = %+v, %v; want b, holding 1 back", k, err)
	}
	if err := b.complete(leased[0].Lease, "ack"); err != nil { // the leased one settles as usual
		t.Fatal(err)
	}

	// Nothing held back: the pin goes, and the command waiting under its
	// digest is left as it was, claimable.
	waiting := b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r2", digestB, 5, `{}`)})
	before := b.get(t, waiting.ID)
	if err := b.store.Contracts.Unpin(b.ctx, sourceEndpoint); err != nil {
		t.Fatalf("Unpin once nothing is held back = %v", err)
	}
	if _, err := b.store.Contracts.Get(b.ctx, sourceEndpoint); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("Get after Unpin = %v, want not_found", err)
	}
	if after := b.get(t, waiting.ID); after.Status != courier.StatusPending || after.Attempts != 0 || !after.UpdatedAt.Equal(before.UpdatedAt) || after.Held != before.Held {
		t.Fatalf("the waiting command after Unpin: %+v, want it as it was: %+v", after, before)
	}

	// The next command pins its own digest, which a pin of b refused; the
	// command of b waiting is held back by it, and that pin stays.
	b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r3", digestA, 5, `{}`)})
	if k, err := b.store.Contracts.Get(b.ctx, sourceEndpoint); err != nil || k.CapabilitiesSHA256 != digestA || k.Mismatched != 1 {
		t.Fatalf("the pin after the next command = %+v, %v; want its digest a, holding the command of b back", k, err)
	}
	if err := b.store.Contracts.Unpin(b.ctx, sourceEndpoint); !errors.Is(err, courier.CodeContractChanged) {
		t.Fatalf("Unpin of the new pin = %v, want contract_changed", err)
	}
	if got := b.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v while the contract changed", ids(got))
	}
}
