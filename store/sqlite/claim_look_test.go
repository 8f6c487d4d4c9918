package sqlite_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestAClaimThatUnparksReadsItsLookOnce: a claim that puts an endpoint's
// parked deliveries back in the due index (outbox_unpark: the endpoint has
// limits, or a delivery of a lower priority waits) claims from the
// priorities they add to the due index too. It learnt them by reading
// outbox_claim_look again, whole: every parked endpoint's room reckoned a
// second time (its leases counted, its limits and bucket read), the
// costliest read of a claim behind a rate-limited backlog, and one such a
// claim makes whenever those endpoints have room again, where one loose
// index scan of the due index once told it. outbox_unpark returns the
// priorities it put back, and the claim reads its look once.
func TestAClaimThatUnparksReadsItsLookOnce(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "outbox.db")
	// outbox_claim_look is the one statement of a claim that builds a
	// JSON array (its priorities): each look runs json_group_array once.
	var looks, hooked atomic.Int64
	defer sqlite.OnConnect(path, func(c *sqlite3.SQLiteConn) error {
		hooked.Add(1)
		return c.RegisterAggregator("json_group_array", func() *jsonArray { looks.Add(1); return &jsonArray{} }, true)
	})()
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if hooked.Load() == 0 {
		t.Fatal("no connection to the database ran the test's hook")
	}
	const limited, other = "https://limited.example/h", "https://other.example/h"
	if err := s.Endpoints.SetLimits(ctx, limited, store.Limits{MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	enqueue := func(id, endpoint string, priority int) {
		t.Helper()
		if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: id, Endpoint: endpoint, Payload: []byte(`{}`), Priority: priority}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func() []string {
		t.Helper()
		got, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range got {
			ids = append(ids, c.NotificationID)
		}
		return ids
	}
	enqueue("first", limited, 0)
	enqueue("second", limited, 2)
	enqueue("third", limited, 2)
	if got := claim(); len(got) != 1 {
		t.Fatalf("claimed %v; want the first, the others parked behind it", got)
	}
	// (A Store's first claim looks for stale keys and parked deliveries
	// past their deadline, and reads its look again after; the next
	// looks for neither for 30 seconds.)
	enqueue("elsewhere", other, 1)
	// Room for the parked deliveries: the next claim unparks them, and
	// leases them after elsewhere, of a lower priority, in claim order.
	if err := s.Endpoints.SetLimits(ctx, limited, store.Limits{MaxInFlight: 10}); err != nil {
		t.Fatal(err)
	}
	looks.Store(0)
	if got := strings.Join(claim(), " "); got != "elsewhere second third" {
		t.Fatalf("the claim that unparked leased [%s]; want [elsewhere second third]", got)
	}
	if n := looks.Load(); n != 1 {
		t.Errorf("the claim that unparked read outbox_claim_look %d times; want once", n)
	}
}

// jsonArray is json_group_array, of integers.
type jsonArray struct{ vs []int64 }

func (a *jsonArray) Step(v int64) { a.vs = append(a.vs, v) }

func (a *jsonArray) Done() string {
	b, _ := json.Marshal(append([]int64{}, a.vs...))
	return string(b)
}
