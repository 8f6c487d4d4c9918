// Package benchkit is what courier's two benchmark programs
// (internal/bench, and bench/peers beside River) share, so their figures
// compare: the same payloads, the same bare receiver, the same bare POST
// loop over the same transport, and the same engines (OpenEngines: SQLite
// files, PostgreSQL from pgtest.Acquire).
package benchkit

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/courier-go/courier/ack"
)

// Object returns a JSON object of n members, about 15 bytes each, their
// keys out of order: a large payload for a bench, or for a test of what
// is done with one.
func Object(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%06d":%d`, (i*7919)%n, i)
	}
	b.WriteByte('}')
	return b.String()
}

// Payload is the body of the notification with the given id: a small
// event of about 110 bytes.
func Payload(id string) []byte {
	return fmt.Appendf(nil, `{"amount":1250,"currency":"EUR","event":"order.paid","notification_id":%q,"schema":"courier.bench.v1"}`, id)
}

// BareAck is the bare receiver: it reads the body and answers courier's
// exact Ack for it (the notification id from webhook-id), with no
// signature check, no parsing and no database.
func BareAck(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	b := ack.New(r.Header.Get("webhook-id"), body).Marshal()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
