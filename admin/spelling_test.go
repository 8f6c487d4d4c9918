package admin

import (
	"testing"

	"github.com/courier-go/courier"
)

// TestAdminRedrivesAnEndpointByTheRefItLists: a database written before
// endpoints were normalized holds a failed delivery under a spelling that
// is not normalized, and the API lists it with that spelling's ref.
// Redriving the endpoint by that ref moves it, and says so. It answered
// 200 with nothing redriven: the store looked for the endpoint's
// normalized form alone.
func TestAdminRedrivesAnEndpointByTheRefItLists(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	const spelled = "https://A.example:443/hooks?x=1&y=2" // hookA as an older courier stored it
	id := b.failed(t, "a-1", hookA)
	if _, err := b.store.DB().ExecContext(t.Context(), "UPDATE courier_outbox SET endpoint = ? WHERE id = ?", spelled, id); err != nil {
		t.Fatal(err)
	}
	page := adminOK[deliveryPageJSON](t, b, "GET", "/api/deliveries?status=failed", "")
	if len(page.Deliveries) != 1 || page.Deliveries[0].ID != id {
		t.Fatalf("failed deliveries listed: %+v, want %d", page.Deliveries, id)
	}
	ref := page.Deliveries[0].EndpointRef
	if got := adminOK[redrivenJSON](t, b, "POST", "/api/redrive", `{"endpoint_ref":"`+ref+`"}`); got.Redriven != 1 {
		t.Fatalf("redrive by the ref listed (%s): %+v, want 1 redriven", ref, got)
	}
	if st := b.status(t, id); st != courier.StatusPending {
		t.Fatalf("the delivery is %s after its endpoint's redrive, want pending", st)
	}
}
