package promcourier_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-go/courier/contrib/promcourier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestEndpointSeriesAreBounded: a scrape gives series of their own to
// 1,000 endpoints at most, however many have limits, deliveries in
// flight or an open breaker, while courier_endpoints still counts every
// endpoint by state. Here 1,001 endpoints are limited (and disabled):
// every one made three series of its own at each scrape, and a scrape
// read every endpoint the outbox keeps.
func TestEndpointSeriesAreBounded(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{Durability: store.DurabilityRelaxed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 1_001 {
		url := fmt.Sprintf("https://limited-%04d.example/hooks", i)
		if err := s.Endpoints.SetLimits(ctx, url, store.Limits{MaxInFlight: 2, Rate: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.Endpoints.Disable(ctx, url); err != nil {
			t.Fatal(err)
		}
	}
	c := promcourier.New()
	c.Watch(s)
	for _, name := range []string{"courier_endpoint_in_flight", "courier_endpoint_max_in_flight", "courier_endpoint_rate"} {
		if n := testutil.CollectAndCount(c, name); n != 1_000 {
			t.Errorf("%s has %d series, want 1000", name, n)
		}
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP courier_endpoints Endpoints whose breaker is not closed, by state.
# TYPE courier_endpoints gauge
courier_endpoints{state="disabled"} 1001
courier_endpoints{state="half_open"} 0
courier_endpoints{state="open"} 0
`), "courier_endpoints"); err != nil {
		t.Error(err)
	}
}
