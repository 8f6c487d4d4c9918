// Package reportkey sets the idempotency_key of an AdCP reporting
// envelope, one per delivery of a fan-out. A receiver of the reporting
// profile dedupes by that key alone, so each subscription a payload is
// published to must see one of its own, in the bytes every retry sends.
//
// A Payload is read once, and each delivery's bytes are then a copy with
// the member spliced in where canonical key order puts it: the payload is
// never decoded and encoded again per subscription.
package reportkey

import (
	"bytes"
	"encoding/json"

	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/strictjson"
)

// Payload is a canonical JSON object read for its idempotency_key
// member, for With.
type Payload struct {
	canonical []byte
	// at and end are where the member goes in canonical: the span of the
	// object's own idempotency_key member, or an empty one where it sorts.
	at, end int
	// before and after are the commas around the member: one before it
	// when it comes after the object's last member, one after it when a
	// member follows that it is put before.
	before, after string
	// err is why no reporting receiver would take the object (see
	// refused), returned by With.
	err error
}

// member is the member Payload sets.
const member = "idempotency_key"

// Read reads canonical, the canonical form of a JSON object
// (ack.Canonical's), for With.
func Read(canonical []byte) Payload {
	k := Payload{canonical: canonical, at: len(canonical) - 1, end: len(canonical) - 1, err: refused(canonical)}
	if len(canonical) > len("{}") {
		k.before = "," // after the last member, unless one sorts after it
	}
	for i := 1; i < len(canonical)-1; {
		start := i
		keyEnd := strictjson.ValueEnd(canonical, i)
		i = strictjson.ValueEnd(canonical, keyEnd+1) // past the ':'
		switch c := bytes.Compare(memberKey(canonical[start:keyEnd]), []byte(member)); {
		case c == 0:
			k.at, k.end, k.before = start, i, "" // in its place, between its commas
			return k
		case c > 0:
			k.at, k.end, k.before, k.after = start, start, "", ","
			return k
		}
		i++ // ',' or the closing '}'
	}
	return k
}

// With returns the canonical object with member idempotency_key set to
// key, a new slice: the object's own member replaced, or one added. It
// returns an error matching canonical.ErrNotFinite for an object that holds an
// integer no float64 holds, which a reporting receiver refuses.
func (k Payload) With(key string) ([]byte, error) {
	if k.err != nil {
		return nil, k.err
	}
	value, err := canonical.Marshal(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(k.canonical)-(k.end-k.at)+len(member)+len(value)+4)
	out = append(out, k.canonical[:k.at]...)
	out = append(out, k.before+`"`+member+`":`...)
	out = append(out, value...)
	out = append(out, k.after...)
	return append(out, k.canonical[k.end:]...), nil
}

// memberKey returns the text of quoted, a key as canonical JSON writes
// it: its own bytes, unless it has an escape (canonical JSON escapes only
// quotes, backslashes and control characters).
func memberKey(quoted []byte) []byte {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return quoted[1 : len(quoted)-1]
	}
	var text string
	_ = json.Unmarshal(quoted, &text) // canonical: it reads
	return []byte(text)
}

// overflowDigits is how many digits an integer needs, at the least, to
// overflow a float64 (math.MaxFloat64 is about 1.8e308).
const overflowDigits = 309

// refused returns why a reporting receiver would refuse doc, which
// ack.Canonical took: the receiver reads it as canonical.JCS does, every number
// a double, and refuses an integer no float64 holds, which Canonical
// keeps exactly (an error matching canonical.ErrNotFinite); nil for any other
// object. Such an integer has overflowDigits digits or more: only a run
// of as many, a rare sight, costs the full reading.
func refused(doc []byte) error {
	run := 0
	for _, c := range doc {
		if c < '0' || c > '9' {
			run = 0
			continue
		}
		if run++; run == overflowDigits {
			_, err := canonical.JCS(doc)
			return err
		}
	}
	return nil
}
