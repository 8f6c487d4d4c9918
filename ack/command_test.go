package ack_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
)

var capabilities = strings.Repeat("c", 64)

func newCommand(t *testing.T, op string) (ack.Command, []byte) {
	t.Helper()
	body := `{"title":"Hello","slug":"hello"}`
	if op != ack.OperationChange {
		body = "null"
	}
	c, err := ack.NewCommand(ack.Command{Operation: op, RequestID: "req-1", SourceMaxAttempts: 3, CapabilitiesSHA256: capabilities, Body: json.RawMessage(body)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return c, b
}

func TestCommandPayload(t *testing.T) {
	t.Parallel()
	c, b := newCommand(t, ack.OperationChange)
	want := `{"body":{"slug":"hello","title":"Hello"},"capabilities_sha256":"` + capabilities + `","operation":"change","request_id":"req-1","schema":"courier.source-command.v1","source_max_attempts":3}`
	if string(b) != want {
		t.Fatalf("payload = %s\nwant      %s", b, want)
	}
	if c.DedupeKey() != "change:req-1" || c.IsRemoval() {
		t.Fatalf("identity %q removal %v", c.DedupeKey(), c.IsRemoval())
	}
	var back ack.Command
	if err := json.Unmarshal(b, &back); err != nil || ack.Validate(back) != nil {
		t.Fatalf("round trip: %v", err)
	}
	if _, b := newCommand(t, ack.OperationTombstone); !strings.Contains(string(b), `"body":null`) {
		t.Fatalf("tombstone payload %s", b)
	}
}

func TestCommandStrictDecoding(t *testing.T) {
	t.Parallel()
	_, valid := newCommand(t, ack.OperationChange)
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(valid, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := map[string]string{
		"unknown member":    edit(func(m map[string]any) { m["extra"] = 1 }),
		"missing body":      edit(func(m map[string]any) { delete(m, "body") }),
		"missing schema":    edit(func(m map[string]any) { delete(m, "schema") }),
		"wrong schema":      edit(func(m map[string]any) { m["schema"] = "x" }),
		"operation":         edit(func(m map[string]any) { m["operation"] = "delete" }),
		"request_id":        edit(func(m map[string]any) { m["request_id"] = "a b" }),
		"budget zero":       edit(func(m map[string]any) { m["source_max_attempts"] = 0 }),
		"budget too large":  edit(func(m map[string]any) { m["source_max_attempts"] = 21 }),
		"budget fraction":   edit(func(m map[string]any) { m["source_max_attempts"] = 1.5 }),
		"budget boolean":    edit(func(m map[string]any) { m["source_max_attempts"] = true }),
		"digest":            edit(func(m map[string]any) { m["capabilities_sha256"] = strings.ToUpper(capabilities) }),
		"change null body":  edit(func(m map[string]any) { m["body"] = nil }),
		"not an object":     `[1]`,
		"duplicate members": `{"schema":"courier.source-command.v1","schema":"courier.source-command.v1"}`,
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var c ack.Command
			err := json.Unmarshal([]byte(doc), &c)
			if err == nil {
				err = ack.Validate(c)
			}
			if err == nil {
				t.Fatalf("accepted %s", doc)
			}
		})
	}
}

func TestCommandProfileVerify(t *testing.T) {
	t.Parallel()
	c, payload := newCommand(t, ack.OperationCancellation)
	const attempt = 2
	base := ack.NewCommandResponse(c, payload, attempt, ack.CommandApplied)
	marshal := func(f func(r *ack.CommandResponse)) []byte {
		r := base
		f(&r)
		return r.Marshal()
	}
	tests := []struct {
		name     string
		response []byte
		ok       bool
	}{
		{"exact", base.Marshal(), true},
		{"already applied", marshal(func(r *ack.CommandResponse) { r.Status = ack.CommandAlreadyApplied }), true},
		{"replay of an earlier attempt", marshal(func(r *ack.CommandResponse) { r.Attempt = 1 }), true},
		{"reordered and spaced", []byte(` { "status":"applied","attempt":2,"source_max_attempts":3,"capabilities_sha256":"` + capabilities + `","payload_sha256":"` + ack.Digest(payload) + `","request_id":"req-1","operation":"cancellation","schema":"courier.source-command-response.v1" } `), true},
		{"wrong schema", marshal(func(r *ack.CommandResponse) { r.Schema = "courier.source-command.v1" }), false},
		{"wrong operation", marshal(func(r *ack.CommandResponse) { r.Operation = ack.OperationTombstone }), false},
		{"wrong request_id", marshal(func(r *ack.CommandResponse) { r.RequestID = "req-2" }), false},
		{"wrong payload digest", marshal(func(r *ack.CommandResponse) { r.PayloadSHA256 = ack.Digest([]byte("other")) }), false},
		{"wrong capabilities digest", marshal(func(r *ack.CommandResponse) { r.CapabilitiesSHA256 = strings.Repeat("d", 64) }), false},
		{"wrong status", marshal(func(r *ack.CommandResponse) { r.Status = "accepted" }), false},
		{"wrong source budget", marshal(func(r *ack.CommandResponse) { r.SourceMaxAttempts = 4 }), false},
		// The attempt is informational (Courier-Attempt is not signed): a
		// replay with a later attempt number may be what the source applied.
		{"attempt after the one sent", marshal(func(r *ack.CommandResponse) { r.Attempt = 3 }), true},
		{"attempt zero", marshal(func(r *ack.CommandResponse) { r.Attempt = 0 }), false},
		{"unknown member", []byte(strings.Replace(string(base.Marshal()), `{`, `{"extra":"x",`, 1)), false},
		{"missing member", []byte(strings.Replace(string(base.Marshal()), `"attempt":2,`, ``, 1)), false},
		{"attempt as string", []byte(strings.Replace(string(base.Marshal()), `"attempt":2`, `"attempt":"2"`, 1)), false},
		{"attempt as float", []byte(strings.Replace(string(base.Marshal()), `"attempt":2`, `"attempt":2.0`, 1)), false},
		{"duplicate member", []byte(strings.Replace(string(base.Marshal()), `{`, `{"attempt":2,`, 1)), false},
		{"empty", nil, false},
		{"courier ack", ack.New("cancellation:req-1", payload).Marshal(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := verifyCommand(payload, attempt, tt.response)
			if tt.ok != (err == nil) {
				t.Fatalf("Verify = %v, want ok %v", err, tt.ok)
			}
			if err != nil && (!errors.Is(err, courier.CodeAckInvalid) || strings.Contains(err.Error(), "req-1")) {
				t.Fatalf("error %v: want ack_invalid, content-free", err)
			}
		})
	}
	// Attempts beyond the source's own budget are never valid, whichever
	// attempt was sent.
	over := ack.NewCommandResponse(c, payload, 4, ack.CommandApplied).Marshal()
	for _, sent := range []int{1, 4} {
		if err := verifyCommand(payload, sent, over); !errors.Is(err, courier.CodeAckInvalid) {
			t.Fatalf("attempt beyond source_max_attempts, attempt %d sent: Verify = %v", sent, err)
		}
	}
}

// verifyCommand verifies a source's response with the command profile.
func verifyCommand(payload []byte, attempt int, response []byte) error {
	p, _ := ack.Builtin(ack.ProfileCommand)
	return p.Verify(ack.Sent{ID: "", Payload: payload, Attempt: attempt}, response)
}
