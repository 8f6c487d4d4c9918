package crash_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/crash"
)

// TestOverlapJudge: an overlap is excused only when each request it
// overlapped had lost its client, or when, leaving out the requests sent
// under a lease that had expired by then while its sender was frozen (the
// request itself, or others), the limit held. Two requests of one
// delivery, or of two deliveries of one key, sent under leases that
// covered them, are a breach: with no freeze, with a frozen sender whose
// lease had not yet expired, or beside a request of an expired lease; so
// is an endpoint over its limit without such requests and those that had
// lost their client (abandoned).
func TestOverlapJudge(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 4, 14, 12, 41, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	req := func(id string, attempt, since int) crash.Request {
		return crash.Request{ID: id, Attempt: attempt, Key: "key-1", Since: at(since)}
	}
	abandoned := func(r crash.Request, ms int) crash.Request { r.Abandoned = at(ms); return r }
	type lease struct {
		id      string
		attempt int
	}
	for _, tc := range []struct {
		name    string
		frozen  map[lease]time.Time // frozen senders' leases, and when each expired
		overlap crash.Overlap
		want    string
	}{{
		name:    "an earlier attempt of the delivery, its sender never frozen",
		overlap: crash.Overlap{Request: req("evt-54:2", 4, 16), Others: []crash.Request{req("evt-54:2", 3, 0)}},
		want:    crash.Breach,
	}, {
		name:    "an earlier attempt whose lease expired while its sender was frozen",
		frozen:  map[lease]time.Time{{"evt-54:2", 3}: at(-300)},
		overlap: crash.Overlap{Request: req("evt-54:2", 4, 16), Others: []crash.Request{req("evt-54:2", 3, 0)}},
		want:    crash.LeaseExpired,
	}, {
		name:    "an earlier attempt of a frozen sender whose lease had not expired yet",
		frozen:  map[lease]time.Time{{"evt-54:2", 3}: at(17)},
		overlap: crash.Overlap{Request: req("evt-54:2", 4, 16), Others: []crash.Request{req("evt-54:2", 3, 0)}},
		want:    crash.Breach,
	}, {
		name:    "the request itself sent on a lease that expired while its sender was frozen",
		frozen:  map[lease]time.Time{{"evt-54:2", 3}: at(-300)},
		overlap: crash.Overlap{Request: req("evt-54:2", 3, 16), Others: []crash.Request{req("evt-54:2", 4, 0)}},
		want:    crash.LeaseExpired,
	}, {
		name:    "two deliveries of one key",
		frozen:  map[lease]time.Time{{"evt-50:2", 1}: at(-300)},
		overlap: crash.Overlap{Request: req("evt-54:2", 1, 16), Others: []crash.Request{req("evt-58:2", 1, 0)}},
		want:    crash.Breach,
	}, {
		name:   "an expired lease's request and a live one",
		frozen: map[lease]time.Time{{"evt-54:2", 3}: at(-300)},
		overlap: crash.Overlap{Request: req("evt-58:2", 1, 16),
			Others: []crash.Request{req("evt-54:2", 3, 0), req("evt-50:2", 2, 1)}},
		want: crash.Breach,
	}, {
		name:   "an expired lease's request and an abandoned one",
		frozen: map[lease]time.Time{{"evt-54:2", 3}: at(-300)},
		overlap: crash.Overlap{Request: req("evt-58:2", 1, 16),
			Others: []crash.Request{req("evt-54:2", 3, 0), abandoned(req("evt-50:2", 2, 1), 20)}},
		want: crash.LeaseExpired,
	}, {
		name:    "abandoned requests only",
		overlap: crash.Overlap{Request: req("evt-54:2", 4, 16), Others: []crash.Request{abandoned(req("evt-54:2", 3, 0), 20)}},
		want:    crash.Abandoned,
	}, {
		name:   "an endpoint within its limit but for expired leases' requests",
		frozen: map[lease]time.Time{{"evt-54:2", 3}: at(-300), {"evt-58:2", 1}: at(-300)},
		overlap: crash.Overlap{Limit: 3, Request: req("evt-62:2", 1, 16),
			Others: []crash.Request{req("evt-54:2", 3, 0), req("evt-58:2", 1, 1), req("evt-50:2", 2, 2), req("evt-66:2", 1, 3)}},
		want: crash.LeaseExpired,
	}, {
		name:   "an endpoint over its limit even without expired leases' requests",
		frozen: map[lease]time.Time{{"evt-54:2", 3}: at(-300)},
		overlap: crash.Overlap{Limit: 3, Request: req("evt-62:2", 1, 16),
			Others: []crash.Request{req("evt-54:2", 3, 0), req("evt-58:2", 1, 1), req("evt-50:2", 2, 2), req("evt-66:2", 1, 3)}},
		want: crash.Breach,
	}, {
		name: "an endpoint within its limit but for abandoned requests, with no freeze",
		overlap: crash.Overlap{Limit: 3, Request: req("evt-62:2", 1, 16),
			Others: []crash.Request{abandoned(req("evt-54:2", 3, 0), 20), req("evt-58:2", 1, 1), req("evt-50:2", 2, 2)}},
		want: crash.Abandoned,
	}, {
		name: "an endpoint over its limit even without abandoned requests",
		overlap: crash.Overlap{Limit: 2, Request: req("evt-62:2", 1, 16),
			Others: []crash.Request{abandoned(req("evt-54:2", 3, 0), 20), req("evt-58:2", 1, 1), req("evt-50:2", 2, 2)}},
		want: crash.Breach,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.overlap.Endpoint = crash.LabelEventsB
			if tc.overlap.Limit == 0 {
				tc.overlap.What, tc.overlap.Limit = "same_key_in_flight", 1
			} else {
				tc.overlap.What = fmt.Sprintf("in_flight=%d max_in_flight=%d", len(tc.overlap.Others)+1, tc.overlap.Limit)
			}
			pastLease := func(endpoint string, r crash.Request, at time.Time) bool {
				expires, ok := tc.frozen[lease{r.ID, r.Attempt}]
				return endpoint == crash.LabelEventsB && ok && !at.Before(expires)
			}
			if got := tc.overlap.Judge(pastLease); got != tc.want {
				t.Errorf("Judge = %s, want %s: %v", got, tc.want, tc.overlap)
			}
			// What the receiver writes is what the parent reads.
			line, err := json.Marshal(tc.overlap)
			if err != nil {
				t.Fatal(err)
			}
			var read crash.Overlap
			if err := json.Unmarshal(line, &read); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(read, tc.overlap) {
				t.Errorf("written %v, read back %v", tc.overlap, read)
			}
		})
	}
}
