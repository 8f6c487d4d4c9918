package admin

import (
	"encoding/json"
	"net/http"
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
