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
	"strconv"
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

// HMACVector is one vector, or rejection vector, of AdCP's
// webhook-hmac-sha256.json.
type HMACVector struct {
	ID                string          `json:"id"`
	Timestamp         json.RawMessage `json:"timestamp"` // a number, or a string in a rejection vector
	RawBody           string          `json:"raw_body"`
	ExpectedSignature string          `json:"expected_signature"`
	ExpectedAction    string          `json:"expected_verifier_action"`
	Signature         *string         `json:"signature"` // rejection vectors; null means absent
	CurrentTime       *int64          `json:"current_time"`
}

// TimestampText returns the vector's timestamp as the header carries it.
func (v HMACVector) TimestampText(t testing.TB) string {
	t.Helper()
	var n int64
	if err := json.Unmarshal(v.Timestamp, &n); err == nil {
		return strconv.FormatInt(n, 10)
	}
	var s string
	if err := json.Unmarshal(v.Timestamp, &s); err != nil {
		t.Fatalf("%s: timestamp %s", v.ID, v.Timestamp)
	}
	return s
}

// HMACVectors is AdCP's webhook-hmac-sha256.json.
type HMACVectors struct {
	Secret           string       `json:"secret"`
	Vectors          []HMACVector `json:"vectors"`
	RejectionVectors []HMACVector `json:"rejection_vectors"`
	SecretRejections []struct {
		Description string `json:"description"`
		Secret      string `json:"secret"`
	} `json:"secret_rejection_vectors"`
	SignerSide struct {
		RejectionVectors []struct {
			ID   string `json:"id"`
			Body string `json:"signer_input_body"`
		} `json:"rejection_vectors"`
		PositiveVectors []struct {
			ID   string `json:"id"`
			Body string `json:"signer_input_body"`
		} `json:"positive_vectors"`
	} `json:"signer_side"`
}

// LoadHMAC reads the vectors at path, failing t unless the file holds
// every vector it is known to: 15 vectors, 10 rejection vectors, 4
// secret rejections, 4 and 1 of the signer's side.
func LoadHMAC(t testing.TB, path string) HMACVectors {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v HMACVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(v.Vectors) != 15 || len(v.RejectionVectors) != 10 || len(v.SecretRejections) != 4 ||
		len(v.SignerSide.RejectionVectors) != 4 || len(v.SignerSide.PositiveVectors) != 1 {
		t.Fatalf("%s: got %d vectors, %d rejection, %d secret rejection, %d/%d signer-side; want 15, 10, 4, 4/1",
			path, len(v.Vectors), len(v.RejectionVectors), len(v.SecretRejections),
			len(v.SignerSide.RejectionVectors), len(v.SignerSide.PositiveVectors))
	}
	return v
}
