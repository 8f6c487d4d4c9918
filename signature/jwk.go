package signature

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The RFC 9421 signature algorithms of the AdCP profile, as the alg
// signature parameter names them.
const (
	AlgEd25519         = "ed25519"
	AlgECDSAP256SHA256 = "ecdsa-p256-sha256"
)

const (
	adcpUseRequest  = adCPUseRequestSigning
	adcpUseWebhook  = adCPUseWebhookSigning
	maxJWKBytes     = 16 << 10
	maxJWKSetBytes  = 1 << 20
	maxJWKSetKeys   = 256
	maxKeyIDBytes   = 256
	jwkKeyOpSign    = "sign"
	jwkKeyOpVerify  = "verify"
	jwkUseSignature = "sig"
	jwkKtyOKP       = "OKP"
	jwkKtyEC        = "EC"
)

// AdCP key purposes (the adcp_use JWK member).
const (
	// adCPUseRequestSigning is the purpose of the key an AdCP agent signs
	// requests and webhooks with.
	adCPUseRequestSigning = "request-signing"
	// adCPUseWebhookSigning is the deprecated webhook-only purpose, still
	// accepted by verifiers.
	adCPUseWebhookSigning = "webhook-signing"
)

// JWK is one JSON Web Key (RFC 7517) of the AdCP RFC 9421 profile: an Ed25519
// ("OKP") or P-256 ("EC") key, public or with its private part. Build it
// with [ParseJWK], [ParseJWKSet] or [GenerateJWK]. It prints and logs
// without key material; the zero value is not a key.
type JWK struct {
	m sealed[*jwkMaterial]
}

type jwkMaterial struct {
	kid     string
	alg     string // AlgEd25519 or AlgECDSAP256SHA256
	use     string
	keyOps  []string
	adcpUse string

	edPublic  ed25519.PublicKey
	edPrivate ed25519.PrivateKey
	ecPublic  *ecdsa.PublicKey
	ecPrivate *ecdsa.PrivateKey
}

// jwkJSON is the wire form. Members this package does not know are ignored.
type jwkJSON struct {
	Kid     string   `json:"kid"`
	Kty     string   `json:"kty"`
	Crv     string   `json:"crv"`
	Alg     string   `json:"alg,omitempty"`
	Use     string   `json:"use,omitempty"`
	KeyOps  []string `json:"key_ops,omitempty"`
	AdCPUse string   `json:"adcp_use,omitempty"`
	X       string   `json:"x"`
	Y       string   `json:"y,omitempty"`
	D       string   `json:"d,omitempty"`
}

// ParseJWK parses one JWK. It requires kid; kty "OKP" with crv "Ed25519", or
// kty "EC" with crv "P-256"; x (and y) as unpadded base64url of the right
// length describing a valid point; if present, d must match them, alg must
// fit the key ("EdDSA" or "Ed25519"; "ES256") and use must be "sig".
// key_ops and adcp_use are kept for the verifier's purpose check.
//
// Errors are cases of courier.CodeConfigInvalid and never contain key
// material.
func ParseJWK(data []byte) (JWK, error) {
	k, err := parseJWK(data)
	if err != nil {
		return JWK{}, configError(err.Error())
	}
	return k, nil
}

// parseJWK is ParseJWK with a plain error, for ParseJWKSet to place.
func parseJWK(data []byte) (JWK, error) {
	if len(data) > maxJWKBytes {
		return JWK{}, errors.New("jwk: too large")
	}
	var j jwkJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&j); err != nil {
		return JWK{}, errors.New("jwk: not a JSON object of the expected shape")
	}
	m, err := j.material()
	if err != nil {
		return JWK{}, fmt.Errorf("jwk %q: %w", printableID(j.Kid), err)
	}
	return JWK{m: seal(m)}, nil
}

// ParseJWKSet parses a JWK Set ({"keys": [...]}) into its keys. Key ids must
// be unique.
//
// Errors are cases of courier.CodeConfigInvalid and never contain key
// material.
func ParseJWKSet(data []byte) ([]JWK, error) {
	if len(data) > maxJWKSetBytes {
		return nil, configError("jwk set: too large")
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, configError(`jwk set: not a JSON object with "keys"`)
	}
	if len(set.Keys) == 0 || len(set.Keys) > maxJWKSetKeys {
		return nil, configError(fmt.Sprintf("jwk set: %d keys, want 1 to %d", len(set.Keys), maxJWKSetKeys))
	}
	keys := make([]JWK, 0, len(set.Keys))
	seen := make(map[string]bool)
	for i, raw := range set.Keys {
		k, err := parseJWK(raw)
		if err != nil {
			return nil, configError(fmt.Sprintf("jwk set: keys[%d]: %s", i, err))
		}
		if seen[k.KeyID()] {
			return nil, configError(fmt.Sprintf("jwk set: key id %q appears twice", printableID(k.KeyID())))
		}
		seen[k.KeyID()] = true
		keys = append(keys, k)
	}
	return keys, nil
}

// GenerateJWK returns a new private key for alg (AlgEd25519 or
// AlgECDSAP256SHA256) with the given key id, adcp_use "request-signing" and
// key_ops ["sign"]. Publish its [JWK.Public] half. An unusable kid or alg
// is a case of courier.CodeConfigInvalid.
func GenerateJWK(kid, alg string) (JWK, error) {
	if kid == "" || len(kid) > maxKeyIDBytes || !printableASCII(kid) {
		return JWK{}, configError("jwk: key id is empty, too long or not printable ASCII")
	}
	m := &jwkMaterial{kid: kid, alg: alg, use: jwkUseSignature, keyOps: []string{jwkKeyOpSign}, adcpUse: adcpUseRequest}
	switch alg {
	case AlgEd25519:
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return JWK{}, err
		}
		m.edPublic, m.edPrivate = pub, priv
	case AlgECDSAP256SHA256:
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return JWK{}, err
		}
		m.ecPrivate, m.ecPublic = priv, &priv.PublicKey
	default:
		return JWK{}, configError(fmt.Sprintf("jwk: alg %q is not %s or %s", printableID(alg), AlgEd25519, AlgECDSAP256SHA256))
	}
	return JWK{m: seal(m)}, nil
}

func (j *jwkJSON) material() (*jwkMaterial, error) {
	if j.Kid == "" || len(j.Kid) > maxKeyIDBytes || !printableASCII(j.Kid) {
		return nil, errors.New("kid is empty, too long or not printable ASCII")
	}
	if j.Use != "" && j.Use != jwkUseSignature {
		return nil, errors.New(`use is not "sig"`)
	}
	m := &jwkMaterial{kid: j.Kid, use: j.Use, keyOps: slices.Clone(j.KeyOps), adcpUse: j.AdCPUse}
	x, err := decodeB64URL(j.X)
	if err != nil {
		return nil, errors.New("x is not unpadded base64url")
	}
	var d []byte
	if j.D != "" {
		if d, err = decodeB64URL(j.D); err != nil {
			return nil, errors.New("d is not unpadded base64url")
		}
	}
	switch {
	case j.Kty == jwkKtyOKP && j.Crv == "Ed25519":
		if j.Alg != "" && j.Alg != "EdDSA" && j.Alg != "Ed25519" {
			return nil, errors.New("alg does not fit an Ed25519 key")
		}
		if j.Y != "" {
			return nil, errors.New("an OKP key has no y")
		}
		if len(x) != ed25519.PublicKeySize {
			return nil, errors.New("x is not 32 bytes")
		}
		m.alg, m.edPublic = AlgEd25519, ed25519.PublicKey(x)
		if d != nil {
			if len(d) != ed25519.SeedSize {
				return nil, errors.New("d is not 32 bytes")
			}
			priv := ed25519.NewKeyFromSeed(d)
			if subtle.ConstantTimeCompare(priv[ed25519.SeedSize:], x) != 1 {
				return nil, errors.New("d does not match x")
			}
			m.edPrivate = priv
		}
	case j.Kty == jwkKtyEC && j.Crv == "P-256":
		if j.Alg != "" && j.Alg != "ES256" {
			return nil, errors.New("alg does not fit a P-256 key")
		}
		y, err := decodeB64URL(j.Y)
		if err != nil || len(x) != 32 || len(y) != 32 {
			return nil, errors.New("x and y are not 32 bytes of unpadded base64url each")
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return nil, errors.New("x and y are not a point of P-256")
		}
		m.alg, m.ecPublic = AlgECDSAP256SHA256, pub
		if d != nil {
			priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
			if err != nil {
				return nil, errors.New("d is not a P-256 private key")
			}
			if !priv.PublicKey.Equal(pub) {
				return nil, errors.New("d does not match x and y")
			}
			m.ecPrivate = priv
		}
	default:
		return nil, errors.New(`want kty "OKP" with crv "Ed25519" or kty "EC" with crv "P-256"`)
	}
	return m, nil
}

// KeyID returns the key's kid.
func (k JWK) KeyID() string {
	if k.m == nil {
		return ""
	}
	return k.m().kid
}

// isPrivate reports whether k holds a private key.
func (k JWK) isPrivate() bool {
	return k.m != nil && (k.m().edPrivate != nil || k.m().ecPrivate != nil)
}

// Public returns the public half of k to publish in a JWK Set: the same
// kid, alg, use and adcp_use, and key_ops ["verify"].
func (k JWK) Public() JWK {
	p := k.withoutPrivate()
	if p.m != nil {
		p.m().keyOps = []string{jwkKeyOpVerify}
	}
	return p
}

// withoutPrivate returns k without its private part, its members unchanged.
func (k JWK) withoutPrivate() JWK {
	if k.m == nil {
		return k
	}
	m := *k.m()
	m.edPrivate, m.ecPrivate = nil, nil
	m.keyOps = slices.Clone(m.keyOps)
	return JWK{m: seal(&m)}
}

// MarshalJSON writes the public part of k as a JWK; the private part is
// never marshaled.
func (k JWK) MarshalJSON() ([]byte, error) {
	if k.m == nil {
		return nil, errors.New("signature: jwk: zero key")
	}
	m := k.m()
	j := jwkJSON{Kid: m.kid, Use: m.use, KeyOps: m.keyOps, AdCPUse: m.adcpUse}
	switch m.alg {
	case AlgEd25519:
		j.Kty, j.Crv, j.Alg, j.X = jwkKtyOKP, "Ed25519", "EdDSA", base64.RawURLEncoding.EncodeToString(m.edPublic)
	default:
		raw, err := m.ecPublic.Bytes() // 0x04 || x || y
		if err != nil {
			return nil, err
		}
		j.Kty, j.Crv, j.Alg = jwkKtyEC, "P-256", "ES256"
		j.X, j.Y = base64.RawURLEncoding.EncodeToString(raw[1:33]), base64.RawURLEncoding.EncodeToString(raw[33:])
	}
	return json.Marshal(j)
}

// purposeOK reports whether a verifier may use k for AdCP webhooks: adcp_use
// is "request-signing" or the deprecated "webhook-signing", key_ops includes
// "verify", and use, if present, is "sig" (checked at parse time).
func (m *jwkMaterial) purposeOK() bool {
	return (m.adcpUse == adcpUseRequest || m.adcpUse == adcpUseWebhook) && slices.Contains(m.keyOps, jwkKeyOpVerify)
}

func (k JWK) kindName() string {
	if k.m == nil {
		return "invalid"
	}
	s := k.m().alg
	if k.isPrivate() {
		s += " private"
	}
	return s
}

// String describes the key without key material.
func (k JWK) String() string {
	return fmt.Sprintf("JWK(%s %q %s)", k.kindName(), k.KeyID(), redacted)
}

// decodeB64URL decodes unpadded base64url and nothing else.
func decodeB64URL(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n=") {
		return nil, errors.New("not unpadded base64url")
	}
	return base64.RawURLEncoding.Strict().DecodeString(s)
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// printableID returns id for an error message, or a placeholder when it is
// too long or not printable.
func printableID(id string) string {
	if len(id) > 64 || !printableASCII(id) {
		return "…"
	}
	return id
}
