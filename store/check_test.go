package store

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/courier-go/courier"
)

// TestCheckHoldsEveryRowToItsInvariants: Check's row validation names
// each broken invariant the schema's CHECK constraints state (a table
// rebuilt without them holds none), and a payload that no longer matches
// its digest, for every delivery that may still be sent.
func TestCheckHoldsEveryRowToItsInvariants(t *testing.T) {
	t.Parallel()
	o := &Outbox{s: &Store{cfg: Config{}.withDefaults()}}
	payload := []byte(`{"n":1}`)
	sum := sha256.Sum256(payload)
	valid := func() outboxRow {
		return outboxRow{
			ID: 1, NotificationID: "n-1", Endpoint: "https://r.example/h", Payload: payload,
			PayloadSHA256: hex.EncodeToString(sum[:]), Profile: "courier", Status: courier.StatusPending,
			MaxAttempts: 8, NextAttemptAt: 10, Deadline: 20, CreatedAt: 10, UpdatedAt: 10,
		}
	}
	str := func(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
	num := func(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: true} }
	leased := func(r *outboxRow) {
		r.Status, r.Attempts = courier.StatusLeased, 1
		r.LeaseOwner, r.LeaseToken, r.LeasedAt, r.LeaseExpiresAt = str("w"), str("t"), num(11), num(12)
	}
	for _, tc := range []struct {
		name string
		edit func(r *outboxRow)
		want string
	}{
		{"sound pending", func(*outboxRow) {}, ""},
		{"sound leased", leased, ""},
		{"sound retry", func(r *outboxRow) { r.Status, r.Attempts, r.LastErrorCode = courier.StatusRetryWait, 1, str("timeout") }, ""},
		{"sound success", func(r *outboxRow) { r.Status, r.Attempts, r.AckSHA256 = courier.StatusSucceeded, 1, str("") }, ""},
		{"succeeded with another payload", func(r *outboxRow) {
			r.Status, r.Attempts, r.AckSHA256, r.Payload = courier.StatusSucceeded, 1, str(""), []byte(`{}`)
		}, ""},
		{"unknown status", func(r *outboxRow) { r.Status = "done" }, "status"},
		{"bad notification id", func(r *outboxRow) { r.NotificationID = "a b" }, "notification_id"},
		{"no endpoint", func(r *outboxRow) { r.Endpoint = "" }, "endpoint"},
		{"bad digest", func(r *outboxRow) { r.PayloadSHA256 = strings.ToUpper(r.PayloadSHA256) }, "payload_sha256"},
		{"over budget", func(r *outboxRow) { r.Attempts = 9 }, "attempts"},
		{"budget over 1000", func(r *outboxRow) { r.MaxAttempts = 1001 }, "attempts"},
		{"negative attempts", func(r *outboxRow) { r.Attempts = -1 }, "attempts"},
		{"leased without token", func(r *outboxRow) { leased(r); r.LeaseToken = sql.NullString{} }, "lease"},
		{"lease ending before it began", func(r *outboxRow) { leased(r); r.LeaseExpiresAt = num(11) }, "lease"},
		{"pending with a lease owner", func(r *outboxRow) { r.LeaseOwner = str("w") }, "lease"},
		{"retry without a code", func(r *outboxRow) { r.Status, r.Attempts = courier.StatusRetryWait, 1 }, "last_error_code"},
		{"failed with a bad code", func(r *outboxRow) { r.Status, r.LastErrorCode = courier.StatusFailed, str("Bad Code") }, "last_error_code"},
		{"succeeded without an ack", func(r *outboxRow) { r.Status = courier.StatusSucceeded }, "ack_sha256"},
		{"pending with an ack", func(r *outboxRow) { r.AckSHA256 = str("x") }, "ack_sha256"},
		{"bad contract digest", func(r *outboxRow) { r.ContractSHA256 = str("x") }, "contract_sha256"},
		{"bad dedupe key", func(r *outboxRow) { r.DedupeKey = str("a b") }, "dedupe_key"},
		{"empty remote code", func(r *outboxRow) { r.LastRemoteCode = str("") }, "last_remote_code"},
		{"remote code over 128 bytes", func(r *outboxRow) { r.LastRemoteCode = str(strings.Repeat("x", 129)) }, "last_remote_code"},
		{"sound trace context", func(r *outboxRow) {
			r.TraceParent, r.TraceState = str("00-"+strings.Repeat("a", 32)+"-"+strings.Repeat("b", 16)+"-01"), str("k=v")
		}, ""},
		{"short traceparent", func(r *outboxRow) { r.TraceParent = str("00-x") }, "trace"},
		{"tracestate without traceparent", func(r *outboxRow) { r.TraceState = str("k=v") }, "trace"},
		{"updated before created (a clock step back)", func(r *outboxRow) { r.UpdatedAt = 9 }, ""},
		{"no update time", func(r *outboxRow) { r.UpdatedAt = 0 }, "times"},
		{"payload altered", func(r *outboxRow) { r.Payload = []byte(`{"n":2}`) }, "payload (digest)"},
		{"failed, payload altered", func(r *outboxRow) {
			r.Status, r.LastErrorCode, r.Payload = courier.StatusFailed, str("timeout"), []byte(`{"n":2}`)
		}, "payload (digest)"},
		{"sealed, no key", func(r *outboxRow) { r.PayloadKeyID = "k1" }, "payload (payload_unreadable)"},
	} {
		r := valid()
		tc.edit(&r)
		if got := o.rowProblem(r); got != tc.want {
			t.Errorf("%s: rowProblem = %q, want %q", tc.name, got, tc.want)
		}
	}
}
