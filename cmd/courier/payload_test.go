package main

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier/store"
)

// TestDeliveriesShowReadsNoPayload: show prints no payload, and reads
// none: a delivery of 4 MiB (the most a payload may be) costs it far
// less than its payload, as does cancel telling why it did not take a
// delivery. Both read the whole row, payload included, to print its
// metadata.
func TestDeliveriesShowReadsNoPayload(t *testing.T) {
	db, s := migrated(t)
	payload := append(append([]byte(`{"blob":"`), bytes.Repeat([]byte("x"), store.MaxPayloadSize-16)...), `"}`...)
	e, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{NotificationID: "big", Endpoint: "https://r.example/hooks", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(e.ID, 10)
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"deliveries", "show", "-db", db, id}, exitOK},
		{[]string{"deliveries", "redrive", "-db", db, id}, exitFailed}, // pending: not redriven, and it says why
	} {
		mustRun(t, c.want, c.args...) // once, so that what a first run sets up is not counted
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		code, out, _ := courierRun(t, c.args...)
		runtime.ReadMemStats(&after)
		if code != c.want || strings.Contains(out, "xxxx") {
			t.Fatalf("courier %s: exit %d, printed %.200s", strings.Join(c.args, " "), code, out)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 2<<20 {
			t.Errorf("courier %s allocated %d bytes for a delivery of %d: it read the payload", strings.Join(c.args, " "), n, len(payload))
		}
	}
}
