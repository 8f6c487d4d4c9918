package storetest

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// testLookupByIdentity: a sender finds a delivery by what it enqueued,
// (notification id, endpoint), and lists one notification's deliveries,
// one per endpoint, with the other filters and pages still applying. An
// identity or filter Enqueue would refuse (on PostgreSQL a NUL or invalid
// UTF-8 would fail in the database) is invalid_argument on both engines;
// one that is well formed but unknown is not found, or an empty page.
func testLookupByIdentity(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(t, "k1", 1)}}})
	endpoints := []string{"https://a.example/h", "https://b.example/h", "https://c.example/h"}
	var ids []int64
	for _, e := range endpoints {
		p := delivery("order-7")
		p.Endpoint = e
		ids = append(ids, b.enqueue(t, p).ID)
		other := delivery("order-8")
		other.Endpoint = e
		b.enqueue(t, other)
		b.clock.Advance(time.Second)
	}
	d, err := b.store.Outbox.Lookup(b.ctx, "order-7", endpoints[1])
	if err != nil || d.ID != ids[1] || string(d.Payload) != string(delivery("order-7").Payload) {
		t.Fatalf("Lookup = %+v, %v; want delivery %d with its payload opened", d, err, ids[1])
	}
	for _, miss := range [][2]string{{"order-9", endpoints[0]}, {"order-7", "https://d.example/h"}} {
		if _, err := b.store.Outbox.Lookup(b.ctx, miss[0], miss[1]); !errors.Is(err, courier.CodeNotFound) {
			t.Fatalf("Lookup(%s, %s) = %v, want CodeNotFound", miss[0], miss[1], err)
		}
	}

	for _, bad := range [][2]string{
		{"order-7" + nul, endpoints[0]}, {"order-7" + notUTF8, endpoints[0]}, {"order 7", endpoints[0]}, {"", endpoints[0]},
		{"order-7", endpoints[0] + nul}, {"order-7", endpoints[0] + notUTF8}, {"order-7", "relative/h"}, {"order-7", ""},
	} {
		if _, err := b.store.Outbox.Lookup(b.ctx, bad[0], bad[1]); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Lookup(%q, %q) = %v, want invalid_argument", bad[0], bad[1], err)
		}
	}
	for name, p := range map[string]store.ListParams{
		"notification id with NUL":   {NotificationID: "order-7" + nul},
		"notification id not UTF-8":  {NotificationID: "order-7" + notUTF8},
		"notification id with space": {NotificationID: "order 7"},
		"endpoint with NUL":          {Endpoint: endpoints[0] + nul},
		"endpoint not UTF-8":         {Endpoint: endpoints[0] + notUTF8},
		"relative endpoint":          {NotificationID: "order-7", Endpoint: "relative/h"},
		"status with NUL":            {Status: courier.StatusFailed + nul},
		"status not UTF-8":           {Status: courier.StatusFailed + notUTF8},
		"unknown status":             {Status: "lost"},
	} {
		if _, err := b.store.Outbox.List(b.ctx, p); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("List with %s = %v, want invalid_argument", name, err)
		}
	}

	list := func(p store.ListParams) []int64 {
		t.Helper()
		page, err := b.store.Outbox.List(b.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, d := range page.Deliveries {
			if d.NotificationID != p.NotificationID {
				t.Fatalf("listed %s for %s", d.NotificationID, p.NotificationID)
			}
			got = append(got, d.ID)
		}
		return got
	}
	newestFirst := slices.Clone(ids)
	slices.Reverse(newestFirst)
	if got := list(store.ListParams{NotificationID: "order-7"}); !slices.Equal(got, newestFirst) {
		t.Fatalf("List by notification = %v, want %v", got, newestFirst)
	}
	c := b.claim(t, "w", 1, time.Minute) // order-7 to a.example, the oldest
	if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	if got := list(store.ListParams{NotificationID: "order-7", Status: courier.StatusFailed}); !slices.Equal(got, ids[:1]) {
		t.Fatalf("List by notification and status = %v, want %v", got, ids[:1])
	}
	if got := list(store.ListParams{NotificationID: "order-7", Endpoint: endpoints[2]}); !slices.Equal(got, ids[2:]) {
		t.Fatalf("List by notification and endpoint = %v, want %v", got, ids[2:])
	}
	page, err := b.store.Outbox.List(b.ctx, store.ListParams{NotificationID: "order-7", Limit: 2})
	if err != nil || len(page.Deliveries) != 2 || page.NextBefore != ids[1] {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	if got := list(store.ListParams{NotificationID: "order-7", Before: page.NextBefore}); !slices.Equal(got, ids[:1]) {
		t.Fatalf("second page = %v, want %v", got, ids[:1])
	}
	if got := list(store.ListParams{NotificationID: "order-unknown"}); len(got) != 0 {
		t.Fatalf("List of an unknown notification = %v", got)
	}
}

// testListShowsWhatGetShows: a delivery in a page of List, by any filter,
// is what Get returns but for its payload, and Lookup returns what Get
// does: held and keyed, leased, or refused with the receiver's own code.
func testListShowsWhatGetShows(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.enqueue(t, keyed("k1", "k"))
	b.enqueue(t, keyed("k2", "k")) // held by its key
	b.enqueue(t, delivery("refused"))
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if c.NotificationID == "refused" {
			if err := b.settle(protocol.Outcome{Lease: c.Lease, Result: protocol.Retry, Code: courier.CodeReceiverRejected,
				HTTPStatus: 422, RemoteCode: "plan_unknown", RetryDelay: time.Second}); err != nil {
				t.Fatal(err)
			}
		}
	}
	page, err := b.store.Outbox.List(b.ctx, store.ListParams{})
	if err != nil || len(page.Deliveries) != 3 {
		t.Fatalf("List = %+v, %v; want 3 deliveries", page, err)
	}
	for _, listed := range page.Deliveries {
		one, err := b.store.Outbox.List(b.ctx, store.ListParams{NotificationID: listed.NotificationID})
		if err != nil || len(one.Deliveries) != 1 {
			t.Fatalf("List of %s = %+v, %v", listed.NotificationID, one, err)
		}
		got := b.get(t, listed.ID)
		if looked, err := b.store.Outbox.Lookup(b.ctx, listed.NotificationID, listed.Endpoint); err != nil || !reflect.DeepEqual(looked, got) {
			t.Errorf("Lookup shows %+v, %v,\nGet shows %+v", looked, err, got)
		}
		got.Payload = nil
		for name, d := range map[string]store.Delivery{"List": listed, "List by notification": one.Deliveries[0]} {
			if !reflect.DeepEqual(d, got) {
				t.Errorf("%s shows %+v,\nGet shows %+v", name, d, got)
			}
		}
	}
	k2, err := b.store.Outbox.Lookup(b.ctx, "k2", delivery("k2").Endpoint)
	if err != nil || k2.Held != store.HeldByKey || k2.OrderingKey != "k" {
		t.Fatalf("k2 is held %q with key %q (%v), want held by key k", k2.Held, k2.OrderingKey, err)
	}
}

// testListTimeBoundsAreExact: Since and Until compare with the stored
// microseconds as they are, a part below the microsecond included, with a
// status or without, and a window no time is in is refused rather than
// answered with an empty page.
func testListTimeBoundsAreExact(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	id := b.enqueue(t, delivery("n-1")).ID
	at := b.get(t, id).UpdatedAt
	for _, c := range []struct {
		name  string
		p     store.ListParams
		found bool
	}{
		{"Since at its time", store.ListParams{Since: at}, true},
		{"Since half a microsecond after", store.ListParams{Since: at.Add(500 * time.Nanosecond)}, false},
		{"Until at its time", store.ListParams{Until: at}, false},
		{"Until half a microsecond after", store.ListParams{Until: at.Add(500 * time.Nanosecond)}, true},
		{"Since and Until around it", store.ListParams{Since: at, Until: at.Add(time.Nanosecond)}, true},
		// A page of one status within a window is a statement of its own
		// (see Outbox.List); its bounds are the same.
		{"its status, Since at its time", store.ListParams{Status: courier.StatusPending, Since: at}, true},
		{"its status, Since half a microsecond after", store.ListParams{Status: courier.StatusPending, Since: at.Add(500 * time.Nanosecond)}, false},
		{"its status, Until at its time", store.ListParams{Status: courier.StatusPending, Until: at}, false},
		{"its status, Since and Until around it", store.ListParams{Status: courier.StatusPending, Since: at, Until: at.Add(time.Nanosecond)}, true},
		{"another status, Since and Until around it", store.ListParams{Status: courier.StatusFailed, Since: at, Until: at.Add(time.Nanosecond)}, false},
	} {
		page, err := b.store.Outbox.List(b.ctx, c.p)
		if err != nil || (len(page.Deliveries) == 1) != c.found {
			t.Errorf("%s: List = %d deliveries, %v; want found %v", c.name, len(page.Deliveries), err, c.found)
		}
	}
	for _, p := range []store.ListParams{
		{Since: at, Until: at},
		{Since: at.Add(time.Second), Until: at},
		{Since: at.Add(time.Nanosecond), Until: at.Add(999 * time.Nanosecond)}, // no microsecond between them
	} {
		if _, err := b.store.Outbox.List(b.ctx, p); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("List(Since %v, Until %v) = %v, want invalid_argument", p.Since, p.Until, err)
		}
	}
}

// testListByIDIsGetWithoutItsPayload: List of one delivery id
// (ListParams.ID) shows what Get shows but the payload, which it does not
// read (a view of one delivery shows none, and it may be 4 MiB, sealed);
// the other filters still apply, an id no delivery has is an empty page,
// and a negative one is invalid_argument.
func testListByIDIsGetWithoutItsPayload(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(t, "k1", 1)}}})
	first := b.enqueue(t, delivery("first"))
	b.enqueue(t, delivery("second"))
	want := b.get(t, first.ID)
	if want.Payload == nil {
		t.Fatal("Get opened no payload")
	}
	want.Payload = nil
	list := func(p store.ListParams) []store.Delivery {
		t.Helper()
		page, err := b.store.Outbox.List(b.ctx, p)
		if err != nil {
			t.Fatalf("List(%+v): %v", p, err)
		}
		return page.Deliveries
	}
	if got := list(store.ListParams{ID: first.ID}); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("List by id shows %+v,\nGet shows %+v", got, want)
	}
	for name, p := range map[string]store.ListParams{
		"another status":          {ID: first.ID, Status: courier.StatusFailed},
		"another notification id": {ID: first.ID, NotificationID: "second"},
		"another endpoint":        {ID: first.ID, Endpoint: "https://other.example/hooks"},
		"ids below it":            {ID: first.ID, Before: first.ID},
		"an id no delivery has":   {ID: first.ID + 100},
	} {
		if got := list(p); len(got) != 0 {
			t.Errorf("List of %s = %+v, want none", name, got)
		}
	}
	if got := list(store.ListParams{ID: first.ID, NotificationID: "first", Status: courier.StatusPending}); len(got) != 1 || got[0].ID != first.ID {
		t.Errorf("List by id and its own filters = %+v, want the delivery", got)
	}
	if _, err := b.store.Outbox.List(b.ctx, store.ListParams{ID: -1}); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Errorf("List of id -1 = %v, want invalid_argument", err)
	}
}
