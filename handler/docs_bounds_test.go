package handler_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
)

// TestSourceAttemptBounds: a Source applies a new command at any attempt
// up to its source_max_attempts, the bound included, and refuses the next
// 422 source_attempts_exhausted; Courier-Attempt itself is 1..1000, so
// 1000 is judged by the budget and 1001 is 400 validation_failed. The
// budget's own bounds (1..20) come from ack.Command.
func TestSourceAttemptBounds(t *testing.T) {
	t.Parallel()
	b := setupSource(t)
	for i, tc := range []struct {
		budget, attempt int
		status          int
		code            courier.Code
	}{
		{1, 1, http.StatusOK, ""},
		{1, 2, http.StatusUnprocessableEntity, courier.CodeSourceAttemptsExhausted},
		{20, 20, http.StatusOK, ""},
		{20, 21, http.StatusUnprocessableEntity, courier.CodeSourceAttemptsExhausted},
		{20, 1000, http.StatusUnprocessableEntity, courier.CodeSourceAttemptsExhausted},
		{20, 1001, http.StatusBadRequest, courier.CodeValidation},
	} {
		id := fmt.Sprintf("bound-%d", i)
		c, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: id, SourceMaxAttempts: tc.budget, CapabilitiesSHA256: sourceDigest, Body: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		body, err := c.Payload()
		if err != nil {
			t.Fatal(err)
		}
		status, code, out := b.post(t, "change:"+id, body, tc.attempt)
		if status != tc.status || code != string(tc.code) {
			t.Errorf("budget %d, attempt %d: %d %s (%s); want %d %s", tc.budget, tc.attempt, status, code, out, tc.status, tc.code)
		}
	}
	for _, budget := range []int{0, 21} {
		_, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: "r", SourceMaxAttempts: budget, CapabilitiesSHA256: sourceDigest, Body: json.RawMessage(`{}`)})
		if err == nil {
			t.Errorf("NewCommand with source_max_attempts %d: accepted, want refused", budget)
		}
	}
}
