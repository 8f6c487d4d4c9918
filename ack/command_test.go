package ack_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/commandresponse"
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
	if c.DedupeKey() != "change:req-1" {
		t.Fatalf("identity %q", c.DedupeKey())
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
	base := commandresponse.For(c, payload, attempt, ack.CommandApplied)
	marshal := func(f func(r *ack.CommandResponse)) []byte {
		r := base
		f(&r)
		return commandresponse.Bytes(r)
	}
	tests := []struct {
		name     string
		response []byte
		ok       bool
	}{
		{"exact", commandresponse.Bytes(base), true},
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
		{"unknown member", []byte(strings.Replace(string(commandresponse.Bytes(base)), `{`, `{"extra":"x",`, 1)), false},
		{"missing member", []byte(strings.Replace(string(commandresponse.Bytes(base)), `"attempt":2,`, ``, 1)), false},
		{"attempt as string", []byte(strings.Replace(string(commandresponse.Bytes(base)), `"attempt":2`, `"attempt":"2"`, 1)), false},
		{"attempt as float", []byte(strings.Replace(string(commandresponse.Bytes(base)), `"attempt":2`, `"attempt":2.0`, 1)), false},
		{"duplicate member", []byte(strings.Replace(string(commandresponse.Bytes(base)), `{`, `{"attempt":2,`, 1)), false},
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
	over := commandresponse.Bytes(commandresponse.For(c, payload, 4, ack.CommandApplied))
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

// TestNewCommandRefusesABodyPayloadCannotWrite: NewCommand accepted a Body
// that is not one strict JSON value, which Payload then failed to write
// with an encoding or canonicalization error naming nothing. Found by
// store's FuzzOutboxParams. NewCommand refuses it, naming body.
func TestNewCommandRefusesABodyPayloadCannotWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, rule string
	}{
		{"not JSON", `A`, "json"},
		{"duplicate key", `{"a":1,"a":2}`, "duplicate_key"},
		{"number beyond float64", `[1e400]`, "finite"},
		{"data after the value", `{"a":1} x`, "json"},
		{"lone surrogate", `"\ud800"`, "json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: "r1", SourceMaxAttempts: 1, CapabilitiesSHA256: capabilities, Body: json.RawMessage(tt.body)})
			var ve *ack.ValidationError
			if !errors.As(err, &ve) {
				_, perr := c.Payload()
				t.Fatalf("NewCommand = %v, want a ValidationError (Payload then says %v)", err, perr)
			}
			if len(ve.Fields) != 1 || ve.Fields[0] != (ack.FieldError{Field: "body", Rule: tt.rule}) {
				t.Fatalf("fields %+v, want body (%s)", ve.Fields, tt.rule)
			}
		})
	}
	// What Payload can write is accepted, and written canonically.
	c, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: "r1", SourceMaxAttempts: 1, CapabilitiesSHA256: capabilities, Body: json.RawMessage(` {"b":[1e300, 2], "a":"\u00e9"} `)})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := c.Payload(); err != nil || !strings.Contains(string(b), `"body":{"a":"é","b":[1e+300,2]}`) {
		t.Fatalf("Payload = %s, %v", b, err)
	}
}

// TestCommandIdentityIsAToken: request_id was checked as a token of up to
// 256 characters, but the command's identity, operation ":" request_id,
// is its notification id and must itself be one; a longer identity was
// refused later, by the store and by the source, naming no field.
// NewCommand refuses it, naming request_id; the longest request_id each
// operation leaves room for is accepted.
func TestCommandIdentityIsAToken(t *testing.T) {
	t.Parallel()
	for _, op := range []string{ack.OperationChange, ack.OperationCancellation, ack.OperationTombstone} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			body := json.RawMessage(`{"a":1}`)
			if op != ack.OperationChange {
				body = json.RawMessage("null")
			}
			longest := 256 - len(op+":")
			c, err := ack.NewCommand(ack.Command{Operation: op, RequestID: strings.Repeat("r", longest), SourceMaxAttempts: 1, CapabilitiesSHA256: capabilities, Body: body})
			if err != nil || len(c.DedupeKey()) != 256 {
				t.Fatalf("request_id of %d: %v (identity of %d)", longest, err, len(c.DedupeKey()))
			}
			_, err = ack.NewCommand(ack.Command{Operation: op, RequestID: strings.Repeat("r", longest+1), SourceMaxAttempts: 1, CapabilitiesSHA256: capabilities, Body: body})
			var ve *ack.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0] != (ack.FieldError{Field: "request_id", Rule: "identity_length"}) {
				t.Fatalf("request_id of %d: %v, want request_id (identity_length)", longest+1, err)
			}
		})
	}
}
