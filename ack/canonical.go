package ack

import "github.com/courier-go/courier/internal/canonical"

// Canonical returns the canonical form of the JSON document doc: object keys
// sorted by code point, no insignificant whitespace, UTF-8 output without
// HTML escaping or escaping of U+2028/U+2029, integers kept exactly, other
// numbers in their shortest round-trip form. The output equals, byte for
// byte, what Python produces for the same document with
//
//	json.dumps(json.loads(doc), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
//
// doc is read strictly: duplicate keys, invalid UTF-8, lone
// surrogates and excessive nesting are errors. Each matches its code
// (courier.CodeOf): duplicate_json_key for a key twice, payload_invalid
// for a number with a fraction or an exponent that no float64 holds (an
// integer is kept exactly, however large, as Python keeps it),
// malformed_json for the others.
func Canonical(doc []byte) ([]byte, error) {
	return canonical.Python(doc)
}
