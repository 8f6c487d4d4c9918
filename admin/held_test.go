package admin

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
)

// A delivery that waits behind an earlier one of its ordering key looks,
// by its status, attempts and error, like one about to be sent. The
// operator's view says why it waits: the API's held member and the page.
func TestAdminShowsWhyADeliveryWaits(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	var ids []int64
	for _, n := range []string{"k-1", "k-2"} {
		e, err := b.store.Outbox.Enqueue(t.Context(), b.store.DB(), store.EnqueueParams{
			NotificationID: n, Endpoint: hookA, Payload: []byte(`{"id":"` + n + `"}`), OrderingKey: "order-7",
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	b.failDue(t) // the head fails for good and holds the key
	d, err := b.store.Outbox.Get(t.Context(), ids[1])
	if err != nil || d.Held != store.HeldByKey {
		t.Fatalf("the second is held %q (%v), want %q", d.Held, err, store.HeldByKey)
	}
	type detail struct {
		Delivery map[string]any `json:"delivery"`
	}
	got := adminOK[detail](t, b, "GET", "/api/deliveries/"+strconv.FormatInt(ids[1], 10), "")
	if got.Delivery["held"] != string(store.HeldByKey) {
		t.Errorf("GET /api/deliveries/{id}: held = %v, want %q: %v", got.Delivery["held"], store.HeldByKey, got.Delivery)
	}
	if got.Delivery["ordering_key"] != "order-7" {
		t.Errorf("GET /api/deliveries/{id}: ordering_key = %v, want the key it waits on: %v", got.Delivery["ordering_key"], got.Delivery)
	}
	head := adminOK[detail](t, b, "GET", "/api/deliveries/"+strconv.FormatInt(ids[0], 10), "")
	if _, ok := head.Delivery["held"]; ok {
		t.Errorf("the failed head has a held member: %v", head.Delivery)
	}
	resp, raw := b.do(t, "GET", "/deliveries/"+strconv.FormatInt(ids[1], 10), "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `id="held"`) ||
		!strings.Contains(string(raw), `<code id="ordering-key">order-7</code>`) {
		t.Errorf("the delivery page does not say why it waits, and on which key: %d %s", resp.StatusCode, raw)
	}
	// A key is the application's text: the page escapes it.
	marked, err := b.store.Outbox.Enqueue(t.Context(), b.store.DB(), store.EnqueueParams{
		NotificationID: "m-1", Endpoint: hookA, Payload: []byte(`{}`), OrderingKey: `<i>k&"1"</i>`,
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, raw = b.do(t, "GET", "/deliveries/"+strconv.FormatInt(marked.ID, 10), "", nil)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(raw), "<i>k") ||
		!strings.Contains(string(raw), `<code id="ordering-key">&lt;i&gt;k&amp;&#34;1&#34;&lt;/i&gt;</code>`) {
		t.Errorf("the delivery page shows the key <i>k&\"1\"</i> unescaped, or not at all: %d %s", resp.StatusCode, raw)
	}
	unkeyed := b.enqueue(t, "u-1", hookA)
	plain := adminOK[detail](t, b, "GET", "/api/deliveries/"+strconv.FormatInt(unkeyed, 10), "")
	if _, ok := plain.Delivery["ordering_key"]; ok {
		t.Errorf("a delivery without an ordering key has an ordering_key member: %v", plain.Delivery)
	}
}

// The endpoint's blocked_keys counts the ordering keys a failed delivery
// holds; GET /api/endpoints/{ref}/blocked-keys names each key and the
// delivery holding it, the one to redrive or cancel so that the others
// go. An endpoint with none answers an empty list; an unknown ref 404.
func TestAdminNamesTheDeliveryHoldingEachBlockedKey(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	var head int64
	for _, n := range []string{"k-1", "k-2"} {
		e, err := b.store.Outbox.Enqueue(t.Context(), b.store.DB(), store.EnqueueParams{
			NotificationID: n, Endpoint: hookA, Payload: []byte(`{"id":"` + n + `"}`), OrderingKey: "order-7",
		})
		if err != nil {
			t.Fatal(err)
		}
		if head == 0 {
			head = e.ID
		}
	}
	b.failDue(t) // the head fails for good and holds the key
	if _, err := b.store.Outbox.Enqueue(t.Context(), b.store.DB(), store.EnqueueParams{
		NotificationID: "b-1", Endpoint: hookB, Payload: []byte(`{"id":"b-1"}`), OrderingKey: "order-9",
	}); err != nil {
		t.Fatal(err)
	}
	type blocked struct {
		BlockedKeys []struct {
			Head        int64     `json:"head"`
			OrderingKey string    `json:"ordering_key"`
			Since       time.Time `json:"since"`
		} `json:"blocked_keys"`
	}
	got := adminOK[blocked](t, b, "GET", "/api/endpoints/"+endpoint.Ref(hookA)+"/blocked-keys", "")
	if len(got.BlockedKeys) != 1 || got.BlockedKeys[0].Head != head || got.BlockedKeys[0].OrderingKey != "order-7" || got.BlockedKeys[0].Since.IsZero() {
		t.Fatalf("blocked keys of hookA: %+v, want order-7 held by %d", got, head)
	}
	if got := adminOK[blocked](t, b, "GET", "/api/endpoints/"+endpoint.Ref(hookB)+"/blocked-keys", ""); got.BlockedKeys == nil || len(got.BlockedKeys) != 0 {
		t.Fatalf("blocked keys of hookB: %+v, want an empty list", got)
	}
	if resp, _ := b.do(t, "GET", "/api/endpoints/"+strings.Repeat("0", 32)+"/blocked-keys", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown ref answered %d, want 404", resp.StatusCode)
	}
}
