package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
)

// TestEndpointsBlockedNamesEachKeysFailedHead: endpoints list counts the
// ordering keys a failed delivery holds (BLOCKED KEYS 1), and nothing
// named the delivery holding each, the one an operator redrives or
// cancels to let the others go. endpoints blocked lists them, every
// endpoint's or one's: the head's id, its endpoint (redacted) and ref,
// the key and since when.
func TestEndpointsBlockedNamesEachKeysFailedHead(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	const a, b = "https://a.example/hooks?token=secret", "https://b.example/hooks"
	var heads []string
	for _, d := range []struct{ id, url, key string }{
		{"a-1", a, "order-7"}, {"a-2", a, "order-7"}, {"b-1", b, "order-9"}, {"b-2", b, "order-9"},
	} {
		e, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{NotificationID: d.id, Endpoint: d.url, Payload: []byte(`{}`), OrderingKey: d.key})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(d.id, "-1") {
			heads = append(heads, strconv.FormatInt(e.ID, 10))
		}
	}
	failAll(t, s) // the heads fail for good and hold their keys
	out := mustRun(t, exitOK, "endpoints", "blocked", "-db", db)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "HEAD") ||
		!strings.HasPrefix(lines[1], heads[0]+" ") || !strings.Contains(lines[1], endpoint.Ref(a)) || !strings.Contains(lines[1], "order-7") ||
		!strings.HasPrefix(lines[2], heads[1]+" ") || !strings.Contains(lines[2], "order-9") || strings.Contains(out, "secret") {
		t.Fatalf("endpoints blocked printed\n%s\nwant a line per key, its head (%v) first, the endpoint redacted", out, heads)
	}
	out = mustRun(t, exitOK, "endpoints", "blocked", "-db", db, endpoint.Ref(b))
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], heads[1]+" ") {
		t.Fatalf("endpoints blocked of b printed\n%s\nwant its one key", out)
	}
	// A URL with a typo in it is no endpoint with nothing blocked: as for
	// redrive and enable, a failure that says so.
	code, out, errOut := courierRun(t, "endpoints", "blocked", "-db", db, "https://b.example/hook")
	if code != exitFailed || out != "" || !strings.Contains(errOut, "no endpoint the database knows") {
		t.Fatalf("endpoints blocked of a URL the database does not know: exit %d, stdout %q, stderr %q; want %d saying so", code, out, errOut, exitFailed)
	}
}
