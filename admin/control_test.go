package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
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
	for _, e := range adminOK[endpointPageJSON](t, b, "GET", "/api/endpoints", "").Endpoints {
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

	for _, body := range []string{`{"max_in_flight":-1,"rate":0}`, `{"max_in_flight":0,"rate":0,"burst":4}`, `{"max_in_flight":0,"rate":-2}`} {
		resp, raw := b.do(t, "POST", "/api/endpoints/"+refB+"/limits", body, nil)
		var p problemBody
		if err := json.Unmarshal(raw, &p); err != nil || resp.StatusCode != http.StatusBadRequest || p.Code != courier.CodeValidation {
			t.Errorf("limits %s: %d %s", body, resp.StatusCode, raw)
		}
	}
	if e := adminOK[endpointJSON](t, b, "POST", "/api/endpoints/"+refB+"/limits", `{"max_in_flight":0,"rate":0}`); e.Limits != (limitsJSON{}) {
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

// TestAdminRedrivesADeliveryItsKeyQuarantined: a delivery quarantined
// payload_unreadable by a process whose payload key was wrong offers
// Redrive on its page, and the redrive sends it again once the key is
// right; one quarantined integrity_mismatch (its row altered) offers
// Cancel only.
func TestAdminRedrivesADeliveryItsKeyQuarantined(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	payloadKey := func(fill byte) store.PayloadKey {
		k, err := store.NewPayloadKey("k1", bytes.Repeat([]byte{fill}, 32))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := setupAdminConfig(t, Config{Authorize: allowAll, Store: s})
	wrong, err := store.Open(ctx, s.DB(), store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(9)}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wrong.Close() })
	claimNone := func(s *store.Store) {
		t.Helper()
		if c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute}); err != nil || len(c) != 0 {
			t.Fatalf("Claim = %+v, %v; want none", c, err)
		}
	}
	altered := b.enqueue(t, "n-2", hookA)
	if _, err := s.DB().ExecContext(ctx, "UPDATE courier_outbox SET payload_sha256 = ? WHERE id = ?", strings.Repeat("0", 64), altered); err != nil {
		t.Fatal(err)
	}
	claimNone(s) // quarantined integrity_mismatch
	unreadable := b.enqueue(t, "n-1", hookA)
	claimNone(wrong) // quarantined payload_unreadable

	for _, tc := range []struct {
		id      int64
		code    courier.Code
		redrive bool
	}{{unreadable, courier.CodePayloadUnreadable, true}, {altered, courier.CodeIntegrity, false}} {
		ref := strconv.FormatInt(tc.id, 10)
		_, raw := b.do(t, "GET", "/deliveries/"+ref, "", nil)
		page := string(raw)
		if !strings.Contains(page, `id="status">quarantined<`) || !strings.Contains(page, string(tc.code)) {
			t.Fatalf("delivery %s is not quarantined %s: %s", ref, tc.code, page)
		}
		if got := strings.Contains(page, `<button id="redrive-`+ref+`">Redrive</button>`); got != tc.redrive {
			t.Fatalf("delivery %s (%s) offers Redrive: %v, want %v", ref, tc.code, got, tc.redrive)
		}
	}
	// The ops page offers both redrives of the unreadable one, and of the
	// altered one neither: with no failed delivery, it is the outbox's only
	// trouble a redrive mends.
	_, raw := b.do(t, "GET", "/", "", nil)
	index := string(raw)
	for _, tc := range []struct {
		what string
		html string
		want bool
	}{
		{"the unreadable one's Redrive", `<button id="redrive-` + strconv.FormatInt(unreadable, 10) + `">Redrive</button>`, true},
		{"the altered one's Redrive", `<button id="redrive-` + strconv.FormatInt(altered, 10) + `">`, false},
		{"the bulk Redrive", `>Redrive every failed or unreadable delivery</button>`, true},
	} {
		if got := strings.Contains(index, tc.html); got != tc.want {
			t.Errorf("the ops page shows %s: %v, want %v", tc.what, got, tc.want)
		}
	}
	resp, _ := b.do(t, "POST", "/ops/redrive", "id="+strconv.FormatInt(unreadable, 10), nil)
	if page := b.follow(t, resp); !strings.Contains(page, "Moved 1 delivery back to pending.") {
		t.Fatalf("after redrive: %s", page)
	}
	c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].DeliveryID != unreadable || string(c[0].Payload) != `{"id":"n-1"}` {
		t.Fatalf("after the redrive claimed %+v, %v; want n-1 with its payload", c, err)
	}
}

// TestAdminNamesTheKeyAnUnreadableDeliveryNeeds: a delivery quarantined
// payload_unreadable is sent again once its payload key is back in every
// worker's Keys, but neither the API nor the page said which key that
// is: with keys retired over several rotations the operator had to guess
// or read the table. Both name it (a key's id, never its bytes); a
// delivery stored as sent names none.
func TestAdminNamesTheKeyAnUnreadableDeliveryNeeds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	k7, err := store.NewPayloadKey("k-2025-07", bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	sealed, err := store.Open(ctx, plain.DB(), store.Config{Encryption: &store.Encryption{Current: "k-2025-07", Keys: []store.PayloadKey{k7}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sealed.Close() })
	b := setupAdminConfig(t, Config{Authorize: allowAll, Store: plain})
	stored := b.enqueue(t, "n-plain", hookA)
	e, err := sealed.Outbox.Enqueue(ctx, sealed.DB(), store.EnqueueParams{NotificationID: "n-sealed", Endpoint: hookA, Payload: []byte(`{"id":"n-sealed"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// The admin's Store holds no key: its claim quarantines the sealed one.
	if c, err := protocol.For(plain).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute}); err != nil || len(c) != 1 || c[0].DeliveryID != stored {
		t.Fatalf("Claim = %+v, %v; want the plaintext one alone", c, err)
	}
	ref := strconv.FormatInt(e.ID, 10)
	type detail struct {
		Delivery map[string]any `json:"delivery"`
	}
	d := adminOK[detail](t, b, "GET", "/api/deliveries/"+ref, "")
	if d.Delivery["last_error_code"] != string(courier.CodePayloadUnreadable) || d.Delivery["payload_key_id"] != "k-2025-07" {
		t.Fatalf("GET /api/deliveries/%s = %v; want payload_unreadable naming payload_key_id k-2025-07", ref, d.Delivery)
	}
	d = adminOK[detail](t, b, "GET", "/api/deliveries/"+strconv.FormatInt(stored, 10), "")
	if _, ok := d.Delivery["payload_key_id"]; ok {
		t.Fatalf("a delivery stored as sent shows payload_key_id: %v", d.Delivery)
	}
	if _, raw := b.do(t, "GET", "/deliveries/"+ref, "", nil); !strings.Contains(string(raw), `<code id="payload-key">k-2025-07</code>`) {
		t.Fatalf("the delivery page does not name its payload key: %s", raw)
	}
}
