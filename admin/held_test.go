package admin

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

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
	head := adminOK[detail](t, b, "GET", "/api/deliveries/"+strconv.FormatInt(ids[0], 10), "")
	if _, ok := head.Delivery["held"]; ok {
		t.Errorf("the failed head has a held member: %v", head.Delivery)
	}
	resp, raw := b.do(t, "GET", "/deliveries/"+strconv.FormatInt(ids[1], 10), "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `id="held"`) {
		t.Errorf("the delivery page does not say why it waits: %d %s", resp.StatusCode, raw)
	}
}
