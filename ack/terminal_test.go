package ack_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/wire"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/jsonbody"
)

// terminalVector is one case of testdata/terminal/vectors.json, computed by
// gen.py from the reference system's rules.
type terminalVector struct {
	Name           string          `json:"name"`
	Content        json.RawMessage `json:"content"`
	NotificationID string          `json:"notification_id"`
	Payload        string          `json:"payload"`
	PayloadSHA256  string          `json:"payload_sha256"`
	Ack            string          `json:"ack"`
	AckSHA256      string          `json:"ack_sha256"`
}

func terminalVectors(t *testing.T) []terminalVector {
	t.Helper()
	var vs []terminalVector
	if err := json.Unmarshal(readFile(t, "testdata/terminal/vectors.json"), &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 8 {
		t.Fatalf("only %d terminal vectors", len(vs))
	}
	return vs
}

func TestTerminalVectors(t *testing.T) {
	t.Parallel()
	for _, v := range terminalVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			var content ack.Terminal
			if err := json.Unmarshal(v.Content, (*terminalFields)(&content)); err != nil {
				t.Fatal(err)
			}
			n, err := ack.NewTerminal(content)
			if err != nil {
				t.Fatalf("NewTerminal: %v", err)
			}
			if n.NotificationID != v.NotificationID {
				t.Fatalf("notification_id = %s, want %s", n.NotificationID, v.NotificationID)
			}
			payload, err := n.Payload()
			if err != nil {
				t.Fatal(err)
			}
			if string(payload) != v.Payload {
				t.Fatalf("payload\n got: %s\nwant: %s", payload, v.Payload)
			}
			if got := ack.Digest(payload); got != v.PayloadSHA256 {
				t.Fatalf("payload digest = %s, want %s", got, v.PayloadSHA256)
			}

			// The receiver's view: strict decode, validation, Ack.
			var got ack.Terminal
			if err := json.Unmarshal([]byte(v.Payload), &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if err := ack.Validate(got); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			a, err := got.Ack([]byte(v.Payload))
			if err != nil {
				t.Fatal(err)
			}
			if string(a.Marshal()) != v.Ack {
				t.Fatalf("ack\n got: %s\nwant: %s", a.Marshal(), v.Ack)
			}
			if ack.Digest(a.Marshal()) != v.AckSHA256 {
				t.Fatalf("ack digest mismatch")
			}

			// The sender's view: the profile expects exactly this Ack.
			p, _ := ack.Builtin(ack.ProfileTerminal)
			if err := p.Verify(ack.Sent{ID: v.NotificationID, Payload: []byte(v.Payload), Attempt: 1}, []byte(v.Ack)); err != nil {
				t.Fatalf("Verify(reference ack): %v", err)
			}
		})
	}
}

// terminalFields decodes a vector's content without the strict member check
// (the content lacks notification_id by construction).
type terminalFields ack.Terminal

func TestTerminalRejects(t *testing.T) {
	t.Parallel()
	v := terminalVectors(t)[0]
	cancelled := terminalVectors(t)[1]
	tests := []struct {
		name   string
		edit   func(m map[string]any)
		base   string
		field  string
		decode bool // the failure is at decode time (members, types)
	}{
		{"unknown member", func(m map[string]any) { m["extra"] = 1 }, v.Payload, "extra", true},
		{"missing member", func(m map[string]any) { delete(m, "plan_id") }, v.Payload, "plan_id", true},
		{"boolean sequence", func(m map[string]any) { m["source_sequence"] = true }, v.Payload, "", true},
		{"float sequence", func(m map[string]any) { m["source_sequence"] = 1.5 }, v.Payload, "", true},
		{"zero job count", func(m map[string]any) { m["job_count"] = 0 }, v.Payload, "job_count", false},
		{"bad schema", func(m map[string]any) { m["schema"] = "other" }, v.Payload, "schema", false},
		{"bad token", func(m map[string]any) { m["site_id"] = "a b" }, v.Payload, "site_id", false},
		{"long token", func(m map[string]any) { m["plan_id"] = strings.Repeat("p", 257) }, v.Payload, "plan_id", false},
		{"uppercase digest", func(m map[string]any) { m["change_sha256"] = strings.ToUpper(m["change_sha256"].(string)) }, v.Payload, "change_sha256", false},
		{"unknown status", func(m map[string]any) { m["terminal_status"] = "done" }, v.Payload, "terminal_status", false},
		{"lifecycle null when published", func(m map[string]any) { m["lifecycle_sha256"] = nil }, v.Payload, "lifecycle_sha256", false},
		{"lifecycle set when cancelled", func(m map[string]any) { m["lifecycle_sha256"] = ack.Digest(nil) }, cancelled.Payload, "lifecycle_sha256", false},
		{"id not derived", func(m map[string]any) { m["notification_id"] = "terminal-" + ack.Digest(nil) }, v.Payload, "notification_id", false},
		{"content changed under id", func(m map[string]any) { m["job_count"] = 4 }, v.Payload, "notification_id", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var m map[string]any
			if err := json.Unmarshal([]byte(tt.base), &m); err != nil {
				t.Fatal(err)
			}
			tt.edit(m)
			b, _ := json.Marshal(m)
			var n ack.Terminal
			err := json.Unmarshal(b, &n)
			if tt.decode {
				if err == nil {
					t.Fatal("decode accepted the payload")
				}
				if tt.field != "" && !hasField(jsonbody.DecodeError(err), tt.field) {
					t.Fatalf("decode error %v does not name %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			err = ack.Validate(n)
			if !errors.Is(err, courier.CodePayloadInvalid) {
				t.Fatalf("Validate = %v, want CodePayloadInvalid", err)
			}
			var ve *ack.ValidationError
			if !errors.As(err, &ve) || !hasField(ve, tt.field) {
				t.Fatalf("Validate = %v, want a field error on %s", err, tt.field)
			}
		})
	}
}

func hasField(ve *ack.ValidationError, field string) bool {
	if ve == nil {
		return false
	}
	return slices.ContainsFunc(ve.Fields, func(f ack.FieldError) bool { return f.Field == field })
}

func TestAckVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"notification_id":"n-1","x":1}`)
	want := ack.New("n-1", body)
	exact := want.Marshal()
	if string(exact) != `{"notification_id":"n-1","notification_sha256":"`+ack.Digest(body)+`","schema":"courier.ack.v1","status":"accepted"}` {
		t.Fatalf("Marshal = %s", exact)
	}
	if err := want.Verify(exact); err != nil {
		t.Fatalf("Verify(exact) = %v", err)
	}
	reordered := `{ "status":"accepted", "schema":"courier.ack.v1", "notification_sha256":"` + ack.Digest(body) + `", "notification_id":"n-1" }`
	if err := want.Verify([]byte(reordered)); err != nil {
		t.Fatalf("Verify(reordered) = %v", err)
	}
	bad := map[string]string{
		"wrong digest":  strings.Replace(string(exact), ack.Digest(body), ack.Digest(nil), 1),
		"wrong id":      strings.Replace(string(exact), `"n-1"`, `"n-2"`, 1),
		"wrong schema":  strings.Replace(string(exact), "courier.ack.v1", "courier.ack.v2", 1),
		"wrong status":  strings.Replace(string(exact), "accepted", "rejected", 1),
		"extra member":  strings.Replace(string(exact), "{", `{"extra":"1",`, 1),
		"missing":       `{"notification_id":"n-1","schema":"courier.ack.v1","status":"accepted"}`,
		"duplicate key": strings.Replace(string(exact), "{", `{"status":"accepted",`, 1),
		"number member": strings.Replace(string(exact), `"accepted"`, `1`, 1),
		"not json":      `accepted`,
		"array":         `[]`,
		"empty":         ``,
		"too large":     `{"pad":"` + strings.Repeat("x", wire.MaxAckSize) + `"}`,
	}
	for name, got := range bad {
		err := want.Verify([]byte(got))
		if !errors.Is(err, courier.CodeAckInvalid) || courier.CodeOf(err) != courier.CodeAckInvalid {
			t.Errorf("%s: Verify = %v, want ack_invalid", name, err)
		}
		if err != nil && strings.Contains(err.Error(), ack.Digest(body)) {
			t.Errorf("%s: error leaks content: %v", name, err)
		}
	}
}

func TestAckParseRoundTrip(t *testing.T) {
	t.Parallel()
	a := ack.Ack{Schema: "s", NotificationID: "id", Status: "accepted", NotificationSHA256: ack.Digest(nil), Extra: map[string]string{"site_id": "x\u2028<"}}
	got, err := ack.Parse(a.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Verify(got.Marshal()); err != nil {
		t.Fatalf("round trip: %v", err)
	}
}

func TestValidatorRules(t *testing.T) {
	t.Parallel()
	type payload struct {
		ID     string `json:"id" validate:"courier_token"`
		Digest string `json:"digest" validate:"courier_sha256"`
		N      int    `json:"count" validate:"gte=1"`
	}
	err := ack.Validate(payload{ID: "bad id", Digest: "abc", N: 0})
	var ve *ack.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v", err)
	}
	want := []ack.FieldError{{Field: "id", Rule: "courier_token"}, {Field: "digest", Rule: "courier_sha256"}, {Field: "count", Rule: "gte"}}
	if !slices.Equal(ve.Fields, want) {
		t.Fatalf("fields = %v, want %v", ve.Fields, want)
	}
	if err := ack.Validate(payload{ID: "ok:1", Digest: ack.Digest(nil), N: 1}); err != nil {
		t.Fatalf("valid payload: %v", err)
	}
}

// Embedded types for TestValidateNamesPromotedFields: encoding/json
// promotes the fields of an untagged embedded struct (or pointer to one),
// and takes a tagged one, or an embedded non-struct, as a member of its
// own.
type (
	PromotedMeta struct {
		Region string `json:"region" validate:"len=2"`
	}
	PromotedRef struct {
		Ref string `json:"ref" validate:"required"`
	}
	NestedMeta struct {
		Zone string `json:"zone" validate:"required"`
	}
	PromotedLabel string
)

// TestValidateNamesPromotedFields: a field of an embedded struct is named
// as the body names it: at the level encoding/json promotes it to, not
// under the embedded type's Go name, which is no member of the body.
func TestValidateNamesPromotedFields(t *testing.T) {
	t.Parallel()
	type payload struct {
		PromotedMeta
		*PromotedRef
		NestedMeta    `json:"nested"`
		PromotedLabel `validate:"required"`
		Items         []struct{ PromotedMeta } `json:"items" validate:"dive"`
	}
	err := ack.Validate(payload{PromotedMeta: PromotedMeta{Region: "europe"}, PromotedRef: &PromotedRef{},
		Items: []struct{ PromotedMeta }{{PromotedMeta{Region: "x"}}}})
	var ve *ack.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v", err)
	}
	want := []ack.FieldError{{Field: "region", Rule: "len"}, {Field: "ref", Rule: "required"}, {Field: "nested.zone", Rule: "required"},
		{Field: "PromotedLabel", Rule: "required"}, {Field: "items[0].region", Rule: "len"}}
	if !slices.Equal(ve.Fields, want) {
		t.Fatalf("fields = %v, want %v", ve.Fields, want)
	}
	type required struct {
		*PromotedRef `validate:"required"`
	}
	if err := ack.Validate(required{}); !errors.As(err, &ve) || !slices.Equal(ve.Fields, []ack.FieldError{{Field: "PromotedRef", Rule: "required"}}) {
		t.Fatalf("Validate of a missing embedded struct = %v", err)
	}
}

func TestTokensAndDigests(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"a": true, "A-z_0.9:": true, "": false, "a b": false, "é": false, strings.Repeat("x", 256): true, strings.Repeat("x", 257): false} {
		if wire.IsToken(s) != want {
			t.Errorf("IsToken(%q) = %v", s, !want)
		}
	}
	d := ack.Digest([]byte("abc"))
	if d != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || !wire.IsDigest(d) || wire.IsDigest(strings.ToUpper(d)) || wire.IsDigest(d[1:]) {
		t.Fatalf("Digest/IsDigest wrong for %s", d)
	}
}

// integerFields are the members of a terminal notification the reference
// takes as any positive integer (source_sequence, job_count), each with
// the setter of its Terminal field and its value in the first vector.
var integerFields = []struct {
	name  string
	set   func(*ack.Terminal, json.Number)
	first string
}{
	{"source_sequence", func(t *ack.Terminal, v json.Number) { t.SourceSequence = v }, "7"},
	{"job_count", func(t *ack.Terminal, v json.Number) { t.JobCount = v }, "3"},
}

// terminalWith is a terminal notification, before NewTerminal, with
// field set to v and the other integer 1.
func terminalWith(field string, v json.Number) ack.Terminal {
	t := ack.Terminal{
		EventID: "evt-1", SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1",
		SourceSequence: "1", JobCount: "1", ChangeSHA256: ack.Digest([]byte("change")),
		LifecycleBindingSHA256: ack.Digest([]byte("binding")), TerminalStatus: "cancelled",
	}
	for _, f := range integerFields {
		if f.name == field {
			f.set(&t, v)
		}
	}
	return t
}

// TestTerminalIntegersBeyondInt64RoundTrip: the reference takes any
// positive integer as source_sequence and job_count; Terminal held them in
// int64s, so a sender could not build, nor a receiver accept, one beyond
// 2^63. A Terminal built with NewTerminal with such a value marshals it as
// the same JSON integer (the canonical form is unchanged), decodes back to
// the same value, and its Ack verifies; the vectors job_count_beyond_uint64
// and job_count_of_40_digits hold the notification_ids the reference
// derives for such counts.
func TestTerminalIntegersBeyondInt64RoundTrip(t *testing.T) {
	t.Parallel()
	for _, f := range integerFields {
		for _, v := range []json.Number{"9223372036854775808", "18446744073709551617", json.Number("1" + strings.Repeat("0", 60))} {
			n, err := ack.NewTerminal(terminalWith(f.name, v))
			if err != nil {
				t.Fatalf("NewTerminal(%s %s): %v", f.name, v, err)
			}
			p, err := n.Payload()
			if err != nil || !strings.Contains(string(p), `,"`+f.name+`":`+string(v)+`,`) {
				t.Fatalf("Payload %s (%v) does not carry %s %s as a JSON integer", p, err, f.name, v)
			}
			if c, err := ack.Canonical(p); err != nil || string(c) != string(p) {
				t.Fatalf("Payload is not canonical: %s (%v)", c, err)
			}
			var back ack.Terminal
			if err := json.Unmarshal(p, &back); err != nil || back != n {
				t.Fatalf("round trip: %+v (%v), want %+v", back, err, n)
			}
			if err := ack.Validate(back); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			a, err := back.Ack(p)
			if err != nil {
				t.Fatal(err)
			}
			profile, _ := ack.Builtin(ack.ProfileTerminal)
			if err := profile.Verify(ack.Sent{ID: n.NotificationID, Payload: p, Attempt: 1}, a.Marshal()); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		}
	}
	for _, name := range []string{"job_count_beyond_uint64", "job_count_of_40_digits"} {
		if !slices.ContainsFunc(terminalVectors(t), func(v terminalVector) bool { return v.Name == name }) {
			t.Errorf("the vectors lack %s (run gen.py)", name)
		}
	}
}

// TestTerminalIntegersMustBePositiveIntegers: what the reference refuses
// as source_sequence or job_count (not an int, or not > 0) both ends
// refuse, naming the field: NewTerminal for a value built in Go, the
// strict decoder and Validate for one received.
func TestTerminalIntegersMustBePositiveIntegers(t *testing.T) {
	t.Parallel()
	payload := terminalVectors(t)[0].Payload
	for _, f := range integerFields {
		for _, v := range []json.Number{"", "0", "-1", "01", "1.5", "1e3", "1E3", " 1", "abc", "+1"} {
			_, err := ack.NewTerminal(terminalWith(f.name, v))
			var ve *ack.ValidationError
			if !errors.As(err, &ve) || !hasField(ve, f.name) {
				t.Errorf("NewTerminal(%s %q) = %v, want a field error on %s", f.name, v, err, f.name)
			}
		}
		for _, raw := range []string{`"7"`, `7.0`, `7e0`, `true`, `null`, `[7]`, `0`, `-7`} {
			b := strings.Replace(payload, `"`+f.name+`":`+f.first, `"`+f.name+`":`+raw, 1)
			if b == payload {
				t.Fatalf("the first vector has no %s of %s", f.name, f.first)
			}
			var n ack.Terminal
			err := json.Unmarshal([]byte(b), &n)
			if err == nil {
				err = ack.Validate(n)
			}
			var ve *ack.ValidationError
			if !errors.As(err, &ve) || !hasField(ve, f.name) {
				t.Errorf("%s %s: %v, want a field error on %s", f.name, raw, err, f.name)
			}
		}
	}
}

// TestReserializedTerminalHasOneDigest: a terminal notification's
// identity is its canonical JSON. PayloadSHA256, what a receiver records
// it by, is the same for every serialization of it (whitespace, member
// order, escapes) and is the digest of its canonical payload; another
// notification for the same event has another digest and the same
// DedupeKey, its event_id.
func TestReserializedTerminalHasOneDigest(t *testing.T) {
	t.Parallel()
	v := terminalVectors(t)[0]
	var n ack.Terminal
	if err := json.Unmarshal([]byte(v.Payload), &n); err != nil {
		t.Fatal(err)
	}
	var members map[string]any
	if err := json.Unmarshal([]byte(v.Payload), &members); err != nil {
		t.Fatal(err)
	}
	indented, _ := json.MarshalIndent(members, "", "  ")
	var ordered strings.Builder // keys in reverse order, spaced
	keys := slices.Sorted(maps.Keys(members))
	slices.Reverse(keys)
	ordered.WriteString("{ ")
	for i, k := range keys {
		if i > 0 {
			ordered.WriteString(", ")
		}
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(members[k])
		ordered.WriteString(string(kb) + ": " + string(vb))
	}
	ordered.WriteString(" }\n")
	escaped := strings.Replace(v.Payload, `"site-1"`, `"\u0073ite\u002d1"`, 1)
	for name, body := range map[string]string{"canonical": v.Payload, "indented": string(indented), "reordered": ordered.String(), "escaped": escaped} {
		got, err := n.PayloadSHA256([]byte(body))
		if err != nil || got != v.PayloadSHA256 {
			t.Errorf("%s: PayloadSHA256 = %s (%v), want the canonical payload's %s", name, got, err, v.PayloadSHA256)
		}
	}
	other := strings.Replace(v.Payload, `"job_count":3`, `"job_count":4`, 1)
	if got, _ := n.PayloadSHA256([]byte(other)); got == v.PayloadSHA256 {
		t.Error("another notification has the same PayloadSHA256")
	}
	if n.DedupeKey() != n.EventID {
		t.Errorf("DedupeKey = %q, want the event_id %q", n.DedupeKey(), n.EventID)
	}
	var _ ack.Digester = n
}
