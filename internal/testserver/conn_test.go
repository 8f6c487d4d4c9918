package testserver_test

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/internal/testserver"
)

// TestReceiverReachesTheConnection: the server counted the receiver's
// answers through a ResponseWriter wrapper without Unwrap, which hid the
// connection from the receiver: its body deadlines (Body.ReadTimeout, and
// the discarding of a refused body) could not be set, and the receiver
// said so at Warn. It reaches the connection, as behind no wrapper.
func TestReceiverReachesTheConnection(t *testing.T) {
	t.Parallel()
	var logs logtest.Records
	b := setup(t, testserver.Config{Logger: slog.New(&logs)})
	n, payload := notification(t, 1)
	got, err := b.send(t.Context(), n.NotificationID, payload)
	if err != nil {
		t.Fatal(err)
	}
	if got.status != http.StatusOK {
		t.Fatalf("status = %d, want 200: %s", got.status, got.body)
	}
	for _, r := range logs.All() {
		if r.Level >= slog.LevelWarn {
			t.Fatalf("the receiver could not reach the connection: %s %q", r.Level, r.Message)
		}
	}
}
