package storetest_test

import (
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// TestAPlainSettleKeepsTheBatchOrderOfAnEndpoint: outcomes of one
// endpoint are applied to its breaker in the order of the batch, as on
// SQLite (Threshold 1). On endpoint flaky a 503 then a 200: the failure
// opens the breaker and the success after it closes it again; settled
// ahead of the batch's transaction by outbox_settle_plain, the success
// found no breaker and did nothing, and the 503 left the endpoint open,
// its deliveries paused, though its last answer was 200. On endpoint
// late a 200 of a keyed delivery (which outbox_settle_plain leaves to
// the transaction) then a 503: the breaker opens; handed to the
// transaction after the 503, the 200 closed it again.
func TestAPlainSettleKeepsTheBatchOrderOfAnEndpoint(t *testing.T) {
	t.Parallel()
	s := couriertest.PostgresStores(t, 1, store.Config{Breaker: store.BreakerConfig{Threshold: 1}})[0]
	const flaky, late = "https://flaky.example/hook", "https://late.example/hook"
	first := enqueue(t, s, store.EnqueueParams{NotificationID: "first", Endpoint: flaky, Payload: []byte(`{"id":"first"}`)})
	second := enqueue(t, s, store.EnqueueParams{NotificationID: "second", Endpoint: flaky, Payload: []byte(`{"id":"second"}`)})
	keyed := enqueue(t, s, store.EnqueueParams{NotificationID: "keyed", Endpoint: late, OrderingKey: "k", Payload: []byte(`{"id":"keyed"}`)})
	after := enqueue(t, s, store.EnqueueParams{NotificationID: "after", Endpoint: late, Payload: []byte(`{"id":"after"}`)})
	leases := make(map[int64]protocol.Lease)
	for _, c := range claimAll(t, s, 4) {
		leases[c.DeliveryID] = c.Lease
	}
	unavailable := func(id int64) protocol.Outcome {
		return protocol.Outcome{Lease: leases[id], Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Minute}
	}
	ok := func(id int64) protocol.Outcome {
		return protocol.Outcome{Lease: leases[id], Result: protocol.Succeeded, HTTPStatus: 200}
	}
	settled, err := protocol.For(s).Settle(t.Context(), ok(keyed), unavailable(first), ok(second), unavailable(after))
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	for i, st := range settled {
		if st.Err != nil {
			t.Fatalf("outcome %d: %v", i, st.Err)
		}
	}
	if h, err := s.Endpoints.Get(t.Context(), flaky); err != nil || h.State != store.EndpointClosed || h.ConsecutiveFailures != 0 {
		t.Errorf("after a 503 then a 200: %+v, %v; want closed, no failure counted (the 200 came last)", h, err)
	}
	if h, err := s.Endpoints.Get(t.Context(), late); err != nil || h.State != store.EndpointOpen {
		t.Errorf("after a 200 then a 503: %+v, %v; want open (the 503 came last)", h, err)
	}
}
