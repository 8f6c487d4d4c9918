package opsjson

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// A finished delivery is not due again: its stored next_attempt_at is the
// time it finished, which an operator would read as a retry to come. The
// operators' view shows it only while the delivery waits to be sent.
func TestNextAttemptOnlyWhileWaiting(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, st := range courier.Statuses() {
		d := store.Delivery{ID: 1, NotificationID: "n", Endpoint: "https://r.example/h", Status: st, NextAttemptAt: at}
		b, err := json.Marshal(NewDelivery(d))
		if err != nil {
			t.Fatal(err)
		}
		waiting := st == courier.StatusPending || st == courier.StatusRetryWait
		if got := strings.Contains(string(b), `"next_attempt_at"`); got != waiting {
			t.Errorf("%s: next_attempt_at shown %v, want %v: %s", st, got, waiting, b)
		}
	}
}
