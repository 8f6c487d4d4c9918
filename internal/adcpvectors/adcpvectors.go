// Package adcpvectors reads AdCP's RFC 9421 webhook-signing test vectors
// (package signature's testdata/adcp/webhook-signing), for the tests of
// the verifier and of the receivers that use it, and names the codes
// AdCP's legacy HMAC rejection vectors are refused with.
package adcpvectors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier"
)

// Vector is one vector of webhook-signing/{positive,negative}.
type Vector struct {
	File         string `json:"-"` // its file's name, without .json
	Name         string `json:"name"`
	ReferenceNow int64  `json:"reference_now"`
	Request      struct {
		Method  string            `json:"method"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"request"`
	JWKSRef               []string                   `json:"jwks_ref"`
	JWKSOverride          map[string]json.RawMessage `json:"jwks_override"`
	ExpectedSignatureBase string                     `json:"expected_signature_base"`
	ExpectedOutcome       struct {
		Success   bool         `json:"success"`
		ErrorCode courier.Code `json:"error_code"`
	} `json:"expected_outcome"`
	State struct {
		ReplayCacheEntries []struct {
			KeyID string `json:"keyid"`
			Nonce string `json:"nonce"`
		} `json:"replay_cache_entries"`
		RevokedKids       []string `json:"revoked_kids"`
		CapFilledFor      string   `json:"per_keyid_cap_filled_for"`
		RevocationStaleBy int64    `json:"revocation_list_stale_seconds"`
	} `json:"test_harness_state"`
}

// Load reads the vectors of dir/kind (kind positive or negative) in file
// order, failing t unless there are want of them.
func Load(t testing.TB, dir, kind string, want int) []Vector {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, kind, "*.json"))
	if err != nil || len(paths) != want {
		t.Fatalf("%s: %d vectors (%v), want %d", filepath.Join(dir, kind), len(paths), err, want)
	}
	slices.Sort(paths)
	vecs := make([]Vector, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &vecs[i]); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		vecs[i].File = strings.TrimSuffix(filepath.Base(p), ".json")
	}
	return vecs
}

// HMACRejectionCodes is the code each rejection vector of AdCP's
// webhook-hmac-sha256.json is refused with, by its id: the verifier's
// and a Reporting receiver's (in its problem and WWW-Authenticate).
var HMACRejectionCodes = map[string]courier.Code{
	"truncated-signature":        courier.CodeSignatureMalformed,
	"wrong-algorithm-prefix":     courier.CodeSignatureMalformed,
	"empty-signature":            courier.CodeSignatureMissing,
	"missing-signature":          courier.CodeSignatureMissing,
	"timestamp-too-old":          courier.CodeSignatureTimestamp,
	"timestamp-too-future":       courier.CodeSignatureTimestamp,
	"non-numeric-timestamp":      courier.CodeSignatureMalformed,
	"body-tampered":              courier.CodeSignatureMismatch,
	"double-prefix":              courier.CodeSignatureMalformed,
	"signer-spaced-wire-compact": courier.CodeSignatureMismatch,
}
