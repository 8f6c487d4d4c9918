package admin

import (
	"maps"
	"testing"
)

// TestAdminHealthCountsEndpointsByBreakerState: a receiver that is down
// blocks nothing, so health stays ok while its breaker is open and its
// backlog waits; courier health prints the endpoints in each state but
// closed beside the outbox's health, and GET /api/health now gives them
// too, every state counted, zero included.
func TestAdminHealthCountsEndpointsByBreakerState(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	type health struct {
		Status    string         `json:"status"`
		Endpoints map[string]int `json:"endpoints"`
	}
	if h := adminOK[health](t, b, "GET", "/api/health", ""); !maps.Equal(h.Endpoints, map[string]int{"open": 0, "half_open": 0, "disabled": 0}) {
		t.Fatalf("an empty store's health: %+v, want every state at 0", h)
	}
	b.enqueue(t, "n-1", hookA)
	if err := b.store.Endpoints.Disable(t.Context(), hookA); err != nil {
		t.Fatal(err)
	}
	if h := adminOK[health](t, b, "GET", "/api/health", ""); !maps.Equal(h.Endpoints, map[string]int{"open": 0, "half_open": 0, "disabled": 1}) {
		t.Fatalf("health with an endpoint disabled: %+v, want disabled 1", h)
	}
}
