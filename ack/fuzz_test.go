package ack_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/commandresponse"
	"github.com/courier-go/courier/internal/wire"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/strictjson"
)

// Fuzz targets for every parser of package ack but Canonical (fuzzed in
// canonical_test.go). Each is seeded from the package's testdata (the
// canonical-JSON cases, the terminal vectors, AdCP's envelope vectors) and
// from testdata/fuzz/<Target>, which holds inputs worth keeping.

// fuzzDocuments returns the JSON documents of the package's testdata.
func fuzzDocuments(f *testing.F) [][]byte {
	f.Helper()
	var docs [][]byte
	files, err := filepath.Glob("testdata/canonical/*")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".golden") {
			docs = append(docs, fuzzRead(f, name))
		}
	}
	for _, v := range fuzzTerminalVectors(f) {
		docs = append(docs, []byte(v.Payload), []byte(v.Ack), v.Content)
	}
	docs = append(docs, fuzzEnvelopes(f)...)
	return append(docs,
		[]byte(`{"a":1,"a":2}`),
		[]byte(`{"a":1,"A":2}`),
		[]byte(`{"a":"\u0061","\u0061":1}`),
		[]byte(`[1e400]`),
		[]byte(`{"x":"\ud800"}`),
		[]byte(`{"x":"\ud83d\ude00"}`),
		[]byte("{\"x\":\"\xff\"}"),
		[]byte(strings.Repeat("[", 101)+strings.Repeat("]", 101)),
		[]byte(strings.Repeat("[", 100)+strings.Repeat("]", 100)),
		[]byte(`[-0, 0.1, 1E+2, 123456789012345678901234567890]`),
		[]byte(" {} "),
	)
}

func fuzzRead(f *testing.F, name string) []byte {
	f.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func fuzzTerminalVectors(f *testing.F) []terminalVector {
	f.Helper()
	var vs []terminalVector
	if err := json.Unmarshal(fuzzRead(f, "testdata/terminal/vectors.json"), &vs); err != nil {
		f.Fatal(err)
	}
	return vs
}

// fuzzEnvelopes returns the payloads of AdCP's envelope vectors.
func fuzzEnvelopes(f *testing.F) [][]byte {
	f.Helper()
	var file struct {
		Positive, Negative []struct {
			Payload json.RawMessage `json:"payload"`
		}
	}
	if err := json.Unmarshal(fuzzRead(f, "testdata/adcp/webhook-receiver-envelope.json"), &file); err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, v := range append(file.Positive, file.Negative...) {
		out = append(out, []byte(v.Payload))
	}
	return out
}

// fuzzCommands returns command payloads of every operation.
func fuzzCommands(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	for _, c := range []ack.Command{
		{Operation: ack.OperationChange, RequestID: "r1", SourceMaxAttempts: 3, CapabilitiesSHA256: strings.Repeat("a", 64), Body: json.RawMessage(`{"a":[1,2.5,"x"]}`)},
		{Operation: ack.OperationTombstone, RequestID: "r:2", SourceMaxAttempts: 1, CapabilitiesSHA256: strings.Repeat("b", 64)},
		{Operation: ack.OperationCancellation, RequestID: "r.3", SourceMaxAttempts: 20, CapabilitiesSHA256: strings.Repeat("c", 64), Body: json.RawMessage(`"why"`)},
	} {
		c, err := ack.NewCommand(c)
		if err != nil {
			f.Fatal(err)
		}
		p, err := c.Payload()
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// FuzzCheck: Check never panics, fails only with its two errors, and
// accepts nothing encoding/json would refuse.
func FuzzCheck(f *testing.F) {
	for _, d := range fuzzDocuments(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := strictjson.Check(doc)
		if err != nil {
			if !errors.Is(err, strictjson.ErrMalformed) && !errors.Is(err, strictjson.ErrDuplicateKey) {
				t.Fatalf("Check error %v wraps neither ErrMalformedJSON nor ErrDuplicateKey", err)
			}
			return
		}
		if !json.Valid(doc) {
			t.Fatalf("Check accepts %q, which encoding/json refuses", doc)
		}
		if _, err := ack.Canonical(doc); err != nil && !errors.Is(err, canonical.ErrNotFinite) {
			t.Fatalf("Canonical refuses what Check accepts: %v", err)
		}
	})
}

// FuzzJCS: JCS never panics; what it returns is valid, strict JSON, a fixed
// point of JCS, and the JCS of the document's Canonical form too.
func FuzzJCS(f *testing.F) {
	for _, d := range fuzzDocuments(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := canonical.JCS(doc)
		if err != nil {
			if strictjson.Check(doc) == nil && !errors.Is(err, canonical.ErrNotFinite) {
				t.Fatalf("JCS refuses a document Check accepts: %v", err)
			}
			return
		}
		if strictjson.Check(doc) != nil {
			t.Fatalf("JCS accepts %q, which Check refuses", doc)
		}
		if err := strictjson.Check(got); err != nil || !json.Valid(got) {
			t.Fatalf("JCS produced invalid JSON %q (%v)", got, err)
		}
		again, err := canonical.JCS(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("JCS not idempotent: %q -> %q (%v)", got, again, err)
		}
		if python, err := ack.Canonical(doc); err == nil {
			viaCanonical, err := canonical.JCS(python)
			if err != nil || !bytes.Equal(viaCanonical, got) {
				t.Fatalf("JCS(Canonical(doc)) = %q (%v), JCS(doc) = %q", viaCanonical, err, got)
			}
		}
	})
}

// FuzzParseAck: Parse and Verify never panic and fail only with
// ack_invalid; a parsed Ack verifies the bytes it came from and its own
// Marshal, which parses back to the same Ack.
func FuzzParseAck(f *testing.F) {
	for _, v := range fuzzTerminalVectors(f) {
		f.Add([]byte(v.Ack))
	}
	f.Add(ack.New("n-1", []byte(`{"a":1}`)).Marshal())
	f.Add([]byte(`{"schema":"courier.ack.v1","notification_id":"n","status":"accepted","notification_sha256":"x","extra":"\u2028"}`))
	f.Add([]byte(`{"schema":"s","notification_id":"n","status":"accepted","notification_sha256":"x","schema":"t"}`))
	f.Add([]byte(`{"schema":"s","notification_id":"n","status":"accepted","notification_sha256":1}`))
	for _, d := range fuzzDocuments(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ack.Parse(b)
		if err != nil {
			if !errors.Is(err, courier.CodeAckInvalid) || courier.CodeOf(err) != courier.CodeAckInvalid {
				t.Fatalf("Parse error %v is not ack_invalid", err)
			}
			if err := (ack.Ack{}).Verify(b); err == nil {
				t.Fatal("Verify accepts what Parse refuses")
			}
			return
		}
		if err := a.Verify(b); err != nil {
			t.Fatalf("a parsed Ack does not verify its own bytes: %v", err)
		}
		m := a.Marshal()
		if err := a.Verify(m); err != nil {
			t.Fatalf("Verify(Marshal(Parse(b))) = %v for %q", err, m)
		}
		back, err := ack.Parse(m)
		if err != nil {
			t.Fatalf("Marshal produced %q, which Parse refuses: %v", m, err)
		}
		if back.Schema != a.Schema || back.NotificationID != a.NotificationID || back.Status != a.Status ||
			back.NotificationSHA256 != a.NotificationSHA256 || !maps.Equal(back.Extra, a.Extra) {
			t.Fatalf("Parse(Marshal(a)) = %+v, want %+v", back, a)
		}
		if !bytes.Equal(back.Marshal(), m) {
			t.Fatalf("Marshal is not stable: %q then %q", m, back.Marshal())
		}
		if canonical, err := ack.Canonical(b); err != nil || !bytes.Equal(canonical, m) {
			t.Fatalf("Marshal(Parse(b)) = %q, Canonical(b) = %q (%v)", m, canonical, err)
		}
	})
}

// FuzzTerminal: decoding and validating a terminal notification never
// panics; one a receiver accepts (strict JSON per Check, then valid)
// re-marshals (Payload) to the canonical form of the bytes it came from,
// which decode to the same value, is recorded under the digest of that
// canonical form (PayloadSHA256), and has an Ack.
func FuzzTerminal(f *testing.F) {
	for _, v := range fuzzTerminalVectors(f) {
		f.Add([]byte(v.Payload))
		f.Add([]byte(v.Content))
	}
	for _, d := range fuzzDocuments(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var n ack.Terminal
		if strictjson.Check(b) != nil || json.Unmarshal(b, &n) != nil {
			return
		}
		if err := ack.Validate(n); err != nil {
			var ve *ack.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate error %v is not a *ValidationError", err)
			}
			return
		}
		p, err := n.Payload()
		if err != nil {
			t.Fatalf("Payload: %v", err)
		}
		var back ack.Terminal
		if err := json.Unmarshal(p, &back); err != nil {
			t.Fatalf("Payload %q does not decode: %v", p, err)
		}
		if !reflect.DeepEqual(back, n) {
			t.Fatalf("Payload decodes to %+v, want %+v", back, n)
		}
		if err := ack.Validate(back); err != nil {
			t.Fatalf("the re-marshalled notification is invalid: %v", err)
		}
		if canonical, err := ack.Canonical(b); err != nil || !bytes.Equal(canonical, p) {
			t.Fatalf("Payload %q differs from Canonical(b) %q (%v)", p, canonical, err)
		}
		if d, err := n.PayloadSHA256(b); err != nil || d != ack.Digest(p) {
			t.Fatalf("PayloadSHA256(b) = %s (%v), want the digest of Payload: a receiver would tell this serialization from the canonical one", d, err)
		}
		a, err := n.Ack(b)
		if err != nil {
			t.Fatalf("Ack: %v", err)
		}
		profile, _ := ack.Builtin(ack.ProfileTerminal)
		if err := profile.Verify(ack.Sent{ID: n.NotificationID, Payload: p, Attempt: 1}, a.Marshal()); err != nil {
			t.Fatalf("the receiver's Ack over b does not verify against the sender's over Payload: %v", err)
		}
	})
}

// FuzzReporting: decoding, validating and checking an AdCP envelope never
// panics; one a receiver accepts (strict JSON per Check, then valid)
// survives a round trip through encoding/json and JCS. Without Check a
// result with a repeated member would decode (encoding/json keeps raw
// bytes as they are) and then have no JCS form.
func FuzzReporting(f *testing.F) {
	for _, p := range fuzzEnvelopes(f) {
		f.Add(p)
	}
	for _, d := range fuzzDocuments(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var n ack.Reporting
		if strictjson.Check(b) != nil || json.Unmarshal(b, &n) != nil {
			return
		}
		_ = n.IsDeliveryReport()
		if err := ack.Validate(n); err != nil {
			var ve *ack.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate error %v is not a *ValidationError", err)
			}
			return
		}
		if !wire.IsToken(n.DedupeKey()) {
			t.Fatalf("accepted idempotency_key %q is not a token", n.DedupeKey())
		}
		m, err := json.Marshal(n)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		var back ack.Reporting
		if err := json.Unmarshal(m, &back); err != nil {
			t.Fatalf("%q does not decode: %v", m, err)
		}
		if err := ack.Validate(back); err != nil {
			t.Fatalf("the re-marshalled envelope is invalid: %v", err)
		}
		back.Result, n.Result = nil, nil // compacted by Marshal
		if !reflect.DeepEqual(back, n) {
			t.Fatalf("round trip: %+v, want %+v", back, n)
		}
		if _, err := canonical.JCS(m); err != nil && !errors.Is(err, canonical.ErrNotFinite) {
			t.Fatalf("JCS of a re-marshalled envelope: %v", err)
		}
	})
}

// FuzzCommand: decoding and validating a command never panics; one a
// source accepts (strict JSON per Check, then valid) re-marshals to an equal command, and the source's response
// verifies at every attempt within its budget. the command profile's Verify never
// panics on arbitrary payloads, attempts and responses.
func FuzzCommand(f *testing.F) {
	resp := commandresponse.Bytes(ack.CommandResponse{Schema: "courier.source-command-response.v1", Operation: "change", RequestID: "r1", PayloadSHA256: strings.Repeat("0", 64),
		CapabilitiesSHA256: strings.Repeat("a", 64), Status: ack.CommandApplied, Attempt: 1, SourceMaxAttempts: 3})
	for _, c := range fuzzCommands(f) {
		f.Add(c, 1, resp)
		f.Add(c, 2, []byte(`{}`))
	}
	for _, d := range fuzzDocuments(f) {
		f.Add(d, 0, d)
	}
	f.Add([]byte(`{"body":{},"capabilities_sha256":"`+strings.Repeat("a", 64)+`","operation":"change","request_id":"r1","schema":"courier.source-command.v1","source_max_attempts":1e0}`), 1, resp)
	f.Fuzz(func(t *testing.T, payload []byte, attempt int, response []byte) {
		if err := verifyCommand(payload, attempt, response); err != nil && !errors.Is(err, courier.CodeAckInvalid) {
			t.Fatalf("Verify error %v is not ack_invalid", err)
		}
		_, _ = wire.ParseAttempt(string(response))
		var c ack.Command
		if strictjson.Check(payload) != nil || json.Unmarshal(payload, &c) != nil {
			return
		}
		if err := ack.Validate(c); err != nil {
			var ve *ack.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate error %v is not a *ValidationError", err)
			}
			return
		}
		p, err := c.Payload()
		if errors.Is(err, canonical.ErrNotFinite) {
			return // a body with a number beyond float64: accepted, but has no canonical form
		}
		if err != nil {
			t.Fatalf("Payload: %v", err)
		}
		var back ack.Command
		if err := json.Unmarshal(p, &back); err != nil {
			t.Fatalf("Payload %q does not decode: %v", p, err)
		}
		if err := ack.Validate(back); err != nil {
			t.Fatalf("the re-marshalled command is invalid: %v", err)
		}
		wantBody, err := ack.Canonical(c.Body)
		if err != nil {
			t.Fatalf("an accepted command's body is not canonicalizable: %v", err)
		}
		if !bytes.Equal(back.Body, wantBody) {
			t.Fatalf("body %q, want %q", back.Body, wantBody)
		}
		back.Body, c.Body = nil, nil
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip: %+v, want %+v", back, c)
		}
		for a := 1; a <= c.SourceMaxAttempts; a++ {
			for _, status := range []string{ack.CommandApplied, ack.CommandAlreadyApplied} {
				r := commandresponse.Bytes(commandresponse.For(c, payload, a, status))
				if err := verifyCommand(payload, a, r); err != nil {
					t.Fatalf("the source's response %q does not verify at attempt %d: %v", r, a, err)
				}
				// The attempt is informational: any attempt sent accepts it.
				if err := verifyCommand(payload, 1, r); err != nil {
					t.Fatalf("a response naming attempt %d does not verify at attempt 1: %v", a, err)
				}
			}
		}
		over := commandresponse.Bytes(commandresponse.For(c, payload, c.SourceMaxAttempts+1, ack.CommandApplied))
		if err := verifyCommand(payload, c.SourceMaxAttempts+1, over); err == nil {
			t.Fatalf("a response naming attempt %d verifies beyond the budget of %d", c.SourceMaxAttempts+1, c.SourceMaxAttempts)
		}
	})
}
