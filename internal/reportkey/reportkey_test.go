package reportkey

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/internal/canonical"
)

// reportingPayloadByMap is how a reporting subscription's payload was
// built before Payload: the whole object decoded, its
// idempotency_key set, and the object encoded again.
func reportingPayloadByMap(payload []byte, idempotencyKey string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, err
	}
	m["idempotency_key"], _ = json.Marshal(idempotencyKey)
	return canonical.Marshal(m)
}

// payloadDocs are objects whose members sit around idempotency_key
// every way canonical key order can put them.
var payloadDocs = []string{
	`{}`,
	`{"a":1}`,
	`{"z":1}`,
	`{"":1}`,
	`{"idempotency_key":"whk_theirs"}`,
	`{"idempotency_key":null}`,
	`{"a":1,"idempotency_key":{"x":[1,{"y":"}"}]},"z":2}`,
	`{"z":[1,2],"idempotency_key":[],"a":{}}`,
	`{"idempotency_kex":1,"idempotency_key_":2,"idempotency_keyz":3,"idempotency":4}`,
	`{"idempotency_key":1,"idempotency_key_":2,"idempotency_kez":3}`,
	`{"Idempotency_key":1,"IDEMPOTENCY_KEY":2,"idempotency-key":3,"idempotencyKey":4}`,
	`{"idempotency\u005fkey":"escaped, the same key"}`,
	`{"idempotency_key\n":1,"idempotency_key\"":2,"idempotency\\key":3,"i\"":4,"\\":5,"\u0000":6}`,
	`{"idempotency_ke\u0000":1,"idempotency_ke\u001f":2,"idempotency_ke~":3,"idempotency_ke\u007f":4}`,
	`{"é":1,"\u2028":2,"😀":3,"ı":4,"idempotency_kéy":5,"idempotency_ke":6,"\ud83d\ude00x":7}`,
	`{"a":"}\"{,:","b":"\\","c":[{"idempotency_key":1}],"d":"\"idempotency_key\":"}`,
	`{"a":"<>&\u2028\u2029","b":"\u00e9\t\r\n\b\f\u0001","c":"\/"}`,
	`{"a":-0,"b":1E2,"c":123456789012345678901234567890,"d":0.1,"e":1.50,"f":-1e-7,"g":15e-1,"h":1e22}`,
	`{"a":true,"b":false,"c":null,"d":[],"e":{},"f":[[],[{}],""],"g":""}`,
	`  { "z" : 1 , "a" : [ 1 , 2 ] , "idempotency_key" : "x" }  `,
	`{"idempotency_key":"a","idempotency_key":"b"}`, // not canonical: refused before
	`[{"idempotency_key":1}]`, // not an object: refused before
	`"idempotency_key"`,
}

// TestPayloadAsBefore: the payload a reporting subscription is sent,
// its idempotency_key spliced into the canonical object, is byte for byte
// the one decoding the object and encoding it again made.
func TestPayloadAsBefore(t *testing.T) {
	docs := append([]string(nil), payloadDocs...)
	docs = append(docs, benchkit.Object(5000), `{"m":`+benchkit.Object(300)+`,"n":[`+benchkit.Object(10)+`]}`)
	keys := []string{"whk_abcdefghijklmnopqrstuvwxyz234567", "", `a"b\c`, "é\u2028😀", "\x00<>&", "\xff"}
	checked := 0
	for _, doc := range docs {
		canonical, err := ack.Canonical([]byte(doc))
		if err != nil || canonical[0] != '{' {
			continue // refused before: no subscription is sent it
		}
		checked++
		k := Read(canonical)
		for _, key := range keys {
			want, err := reportingPayloadByMap(canonical, key)
			if err != nil {
				t.Fatalf("%s: %v", doc, err)
			}
			got, err := k.With(key)
			if err != nil {
				t.Fatalf("%s with %q: %v", doc, key, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%.200s with %q:\n got %.300s\nwant %.300s", doc, key, got, want)
			}
		}
		if !bytes.Equal(k.canonical, canonical) {
			t.Fatalf("%s: with wrote into the canonical payload", doc)
		}
	}
	if checked < len(docs)-3 {
		t.Fatalf("only %d of %d documents are canonical objects", checked, len(docs))
	}
}

// FuzzPayload: for any object a publish accepts, the spliced
// payload is the one decoding and encoding again made.
func FuzzPayload(f *testing.F) {
	for _, doc := range payloadDocs {
		f.Add([]byte(doc), "whk_abcdefghijklmnopqrstuvwxyz234567")
	}
	f.Add([]byte(`{"idempotency_key":1}`), `"\`)
	f.Fuzz(func(t *testing.T, doc []byte, key string) {
		canonical, err := ack.Canonical(doc)
		if err != nil || canonical[0] != '{' {
			return
		}
		want, err := reportingPayloadByMap(canonical, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Read(canonical).With(key)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%q with %q:\n got %q\nwant %q", canonical, key, got, want)
		}
	})
}
