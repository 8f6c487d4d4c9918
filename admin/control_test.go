package admin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// TestAdminShowsLimitsInFlightAndBlockedKeys: the endpoints API and page
// show an endpoint's limits, its deliveries in flight and its ordering
// keys a failed delivery holds; POST /api/endpoints/{ref}/limits sets the
// limits, and refuses ones no claim could honour.
func TestAdminShowsLimitsInFlightAndBlockedKeys(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	ctx := t.Context()
	for _, p := range []store.EnqueueParams{
		{NotificationID: "k-1", Endpoint: hookA, Payload: []byte(`{}`), OrderingKey: "order-7"},
		{NotificationID: "k-2", Endpoint: hookA, Payload: []byte(`{}`), OrderingKey: "order-7"},
		{NotificationID: "n-1", Endpoint: hookB, Payload: []byte(`{}`)},
	} {
		if _, err := b.store.Outbox.Enqueue(ctx, b.store.DB(), p); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := protocol.For(b.store).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("Claim = %d, %v", len(claimed), err)
	}
	for _, c := range claimed {
		if c.Endpoint == hookA { // the key's head fails: it holds the key
			if _, err := protocol.For(b.store).Settle(ctx, protocol.Outcome{Lease: c.Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: 422}); err != nil {
				t.Fatal(err)
			}
		}
	}

	e := adminOK[endpointJSON](t, b, "POST", "/api/endpoints/"+refB+"/limits", `{"max_in_flight":3,"rate":2.5}`)
	if e.Ref != refB || e.Limits != (limitsJSON{MaxInFlight: 3, Rate: 2.5, Burst: 3}) || e.InFlight != 1 {
		t.Fatalf("after setting limits: %+v", e)
	}
	byRef := map[string]endpointJSON{}
	for _, e := range adminOK[[]endpointJSON](t, b, "GET", "/api/endpoints", "") {
		byRef[e.Ref] = e
	}
	if a := byRef[refA]; a.BlockedKeys != 1 || a.InFlight != 0 {
		t.Fatalf("endpoint A: %+v, want one blocked key", a)
	}
	if bb := byRef[refB]; bb.InFlight != 1 || bb.Limits.MaxInFlight != 3 {
		t.Fatalf("endpoint B: %+v, want one in flight and its limits", bb)
	}
	_, raw := b.do(t, "GET", "/", "", nil)
	page := string(raw)
	for _, want := range []string{"at most 3 in flight", "2.5/s, burst 3", `<span class="tag failed">1</span>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the ops page does not show %q", want)
		}
	}

	for _, body := range []string{`{"max_in_flight":-1}`, `{"burst":4}`, `{"rate":-2}`} {
		resp, raw := b.do(t, "POST", "/api/endpoints/"+refB+"/limits", body, nil)
		var p problemBody
		if err := json.Unmarshal(raw, &p); err != nil || resp.StatusCode != http.StatusBadRequest || p.Code != courier.CodeInvalidArgument {
			t.Errorf("limits %s: %d %s", body, resp.StatusCode, raw)
		}
	}
	if e := adminOK[endpointJSON](t, b, "POST", "/api/endpoints/"+refB+"/limits", `{}`); e.Limits != (limitsJSON{}) {
		t.Fatalf("after removing the limits: %+v", e.Limits)
	}
}

// TestAdminCancelsAHeadThatHoldsItsKey: a failed delivery that holds its
// ordering key offers Cancel on its page (as a quarantined one would:
// Cancel is what frees such a key), and cancelling it lets the next
// delivery of the key be claimed.
func TestAdminCancelsAHeadThatHoldsItsKey(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	ctx := t.Context()
	var ids []int64
	for _, id := range []string{"k-1", "k-2"} {
		e, err := b.store.Outbox.Enqueue(ctx, b.store.DB(), store.EnqueueParams{NotificationID: id, Endpoint: hookA, Payload: []byte(`{}`), OrderingKey: "order-7"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	b.failDue(t) // k-1 fails and holds the key
	head := strconv.FormatInt(ids[0], 10)
	_, raw := b.do(t, "GET", "/deliveries/"+head, "", nil)
	if !strings.Contains(string(raw), `<form method="post" action="../ops/cancel"><input type="hidden" name="id" value="`+head+`">`) {
		t.Fatalf("the failed head's page offers no Cancel: %s", raw)
	}
	resp, _ := b.do(t, "POST", "/ops/cancel", "id="+head, nil)
	if page := b.follow(t, resp); !strings.Contains(page, "Delivery cancelled.") {
		t.Fatalf("after cancel: %s", page)
	}
	claimed, err := protocol.For(b.store).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(claimed) != 1 || claimed[0].DeliveryID != ids[1] {
		t.Fatalf("after cancelling the head claimed %+v, %v; want k-2", claimed, err)
	}
}
