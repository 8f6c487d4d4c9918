package testserver_test

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/courier-go/courier/internal/testserver"
)

// lockedLog is a log buffer safe for the receiver's concurrent writes.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestReceiverReachesTheConnection: the server counted the receiver's
// answers through a ResponseWriter wrapper without Unwrap, which hid the
// connection from the receiver: its body deadlines (Body.ReadTimeout, and
// the discarding of a refused body) could not be set, and the receiver
// said so at Warn. It reaches the connection, as behind no wrapper.
func TestReceiverReachesTheConnection(t *testing.T) {
	t.Parallel()
	logs := &lockedLog{}
	b := setup(t, testserver.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	n, payload := notification(t, 1)
	got, err := b.send(t.Context(), n.NotificationID, payload)
	if err != nil {
		t.Fatal(err)
	}
	if got.status != http.StatusOK {
		t.Fatalf("status = %d, want 200: %s", got.status, got.body)
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("the receiver could not reach the connection:\n%s", logs)
	}
}
