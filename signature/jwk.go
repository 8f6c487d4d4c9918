package signature

import (
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

	"github.com/courier-go/courier/internal/strictjson"
)

// The RFC 9421 signature algorithms of the AdCP profile, as the alg
// signature parameter names them.
const (
	AlgEd25519         = "ed25519"
	AlgECDSAP256SHA256 = "ecdsa-p256-sha256"
)

const (
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

// jwkJSON is the wire form: what MarshalJSON writes and jwkMembers reads.
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
// length describing a valid point, for Ed25519 not one of small order; if
// present, d must match them, alg must fit the key ("EdDSA" or "Ed25519";
// "ES256") and use must be "sig". key_ops and adcp_use are kept for the
// verifier's purpose check.
//
// The JSON is read as courier reads untrusted JSON: one object, valid
// UTF-8, no member twice; member names are matched exactly, as RFC 7517
// names them ("Use" or "KEY_OPS" is not "use" or "key_ops", but an unknown
// member, ignored like any other). The members read are strings, key_ops
// an array of strings.
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

// parseJWK is ParseJWK with a plain error.
func parseJWK(data []byte) (JWK, error) {
	if len(data) > maxJWKBytes {
		return JWK{}, errors.New("jwk: too large")
	}
	doc, err := strictjson.Parse(data)
	if err != nil {
		return JWK{}, strictJSONError("jwk", err)
	}
	j, err := jwkMembers(doc)
	if err != nil {
		return JWK{}, fmt.Errorf("jwk: %w", err)
	}
	return j.jwk()
}

// jwk builds the key j describes.
func (j *jwkJSON) jwk() (JWK, error) {
	m, err := j.material()
	if err != nil {
		return JWK{}, fmt.Errorf("jwk %q: %w", printableID(j.Kid), err)
	}
	return JWK{m: seal(m)}, nil
}

// strictJSONError describes a document strictjson refuses, without its
// content.
func strictJSONError(what string, err error) error {
	if errors.Is(err, strictjson.ErrDuplicateKey) {
		return errors.New(what + ": a member appears twice in one object")
	}
	return errors.New(what + ": not one JSON document of valid UTF-8")
}

// jwkMembers reads the members of a JWK this package knows, by their exact
// names, from doc.
func jwkMembers(doc strictjson.Value) (*jwkJSON, error) {
	if doc.Kind != strictjson.Object {
		return nil, errors.New("not a JSON object")
	}
	j := new(jwkJSON)
	for _, m := range doc.Members {
		var dst *string
		switch m.Key {
		case "kid":
			dst = &j.Kid
		case "kty":
			dst = &j.Kty
		case "crv":
			dst = &j.Crv
		case "alg":
			dst = &j.Alg
		case "use":
			dst = &j.Use
		case "adcp_use":
			dst = &j.AdCPUse
		case "x":
			dst = &j.X
		case "y":
			dst = &j.Y
		case "d":
			dst = &j.D
		case "key_ops":
			if m.Val.Kind != strictjson.Array {
				return nil, errors.New("key_ops is not an array of strings")
			}
			j.KeyOps = make([]string, 0, len(m.Val.Items))
			for _, op := range m.Val.Items {
				if op.Kind != strictjson.String {
					return nil, errors.New("key_ops is not an array of strings")
				}
				j.KeyOps = append(j.KeyOps, op.Text)
			}
			continue
		default:
			continue // members this package does not know are ignored
		}
		if m.Val.Kind != strictjson.String {
			return nil, fmt.Errorf("%s is not a string", m.Key)
		}
		*dst = m.Val.Text
	}
	return j, nil
}

// jwkSupported reports whether the JWK doc (an object) is of a key type
// and use this package verifies with: kty "OKP" with crv "Ed25519" or kty
// "EC" with crv "P-256", and a signing key: use absent (or empty) or
// "sig", alg not one of JWE's ECDH-ES key agreements, and key_ops, when
// it is an array of strings, naming "sign" or "verify" (an encryption or
// key-agreement key may say what it is by any of the three). It reads
// only those members, so a key of another type or use is recognized as
// such whatever its other members hold.
func jwkSupported(doc strictjson.Value) bool {
	var kty, crv, use, alg string
	signingOps := true // key_ops absent, or not an array of strings: ParseJWK judges it
	for _, m := range doc.Members {
		text := m.Val.Text
		if m.Val.Kind != strictjson.String {
			text = "\x00" // no kty, crv, use or alg this package knows
		}
		switch m.Key {
		case "kty":
			kty = text
		case "crv":
			crv = text
		case "use":
			use = text
		case "alg":
			alg = text
		case "key_ops":
			signingOps = !agreementOps(m.Val)
		}
	}
	return (kty == jwkKtyOKP && crv == "Ed25519" || kty == jwkKtyEC && crv == "P-256") &&
		(use == "" || use == jwkUseSignature) && // "" as ParseJWK reads it: absent
		!strings.HasPrefix(alg, "ECDH-ES") && signingOps
}

// agreementOps reports whether ops, a JWK's key_ops, is an array of
// strings that names neither "sign" nor "verify": the operations of
// another use (encrypt, deriveKey, wrapKey, …).
func agreementOps(ops strictjson.Value) bool {
	if ops.Kind != strictjson.Array {
		return false
	}
	for _, op := range ops.Items {
		if op.Kind != strictjson.String || op.Text == jwkKeyOpSign || op.Text == jwkKeyOpVerify {
			return false
		}
	}
	return true
}

// ParseJWKSet parses a JWK Set ({"keys": [...]}, 1 to 256 keys) into the
// keys courier verifies with. As RFC 7517 §5 asks, keys of another type
// (kty and crv other than "OKP" "Ed25519" and "EC" "P-256", such as RSA or
// X25519 keys) or of another use than signing (encryption and key
// agreement keys: use other than "sig", an ECDH-ES alg, or key_ops that
// name neither "sign" nor "verify") are skipped, so a sender's set may
// publish keys for other purposes beside its signing keys. Each key of a supported type must parse as ParseJWK
// parses it, and their key ids must be unique (a skipped key may share
// one). A set left with no key is refused. The JSON is read as ParseJWK
// reads it: exact member names, no member twice in any object.
//
// Errors are cases of courier.CodeConfigInvalid and never contain key
// material.
func ParseJWKSet(data []byte) ([]JWK, error) {
	if len(data) > maxJWKSetBytes {
		return nil, configError("jwk set: too large")
	}
	doc, err := strictjson.Parse(data)
	if err != nil {
		return nil, configError(strictJSONError("jwk set", err).Error())
	}
	var items []strictjson.Value
	found := false
	if doc.Kind == strictjson.Object {
		for _, m := range doc.Members {
			if m.Key == "keys" {
				items, found = m.Val.Items, m.Val.Kind == strictjson.Array
			}
		}
	}
	if !found {
		return nil, configError(`jwk set: not a JSON object with a "keys" array`)
	}
	if len(items) == 0 || len(items) > maxJWKSetKeys {
		return nil, configError(fmt.Sprintf("jwk set: %d keys, want 1 to %d", len(items), maxJWKSetKeys))
	}
	keys := make([]JWK, 0, len(items))
	seen := make(map[string]bool)
	for i, item := range items {
		if item.Kind == strictjson.Object && !jwkSupported(item) {
			continue // RFC 7517 §5: ignore keys not understood
		}
		j, err := jwkMembers(item)
		if err != nil {
			return nil, configError(fmt.Sprintf("jwk set: keys[%d]: jwk: %s", i, err))
		}
		k, err := j.jwk()
		if err != nil {
			return nil, configError(fmt.Sprintf("jwk set: keys[%d]: %s", i, err))
		}
		if seen[k.KeyID()] {
			return nil, configError(fmt.Sprintf("jwk set: key id %q appears twice", printableID(k.KeyID())))
		}
		seen[k.KeyID()] = true
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, configError(`jwk set: no key courier verifies with (kty "OKP" crv "Ed25519" or kty "EC" crv "P-256", use "sig")`)
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
	m := &jwkMaterial{kid: kid, alg: alg, use: jwkUseSignature, keyOps: []string{jwkKeyOpSign}, adcpUse: adCPUseRequestSigning}
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

// material checks the key j describes and returns it: an Ed25519 or a
// P-256 public key, with its private half when j has a d that matches it.
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
		err = j.ed25519Into(m, x, d)
	case j.Kty == jwkKtyEC && j.Crv == "P-256":
		err = j.p256Into(m, x, d)
	default:
		err = errors.New(`want kty "OKP" with crv "Ed25519" or kty "EC" with crv "P-256"`)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// ed25519Into checks j as an Ed25519 key, whose public key is x and
// seed d (nil for none), and sets it in m.
func (j *jwkJSON) ed25519Into(m *jwkMaterial, x, d []byte) error {
	if j.Alg != "" && j.Alg != "EdDSA" && j.Alg != "Ed25519" {
		return errors.New("alg does not fit an Ed25519 key")
	}
	if j.Y != "" {
		return errors.New("an OKP key has no y")
	}
	if len(x) != ed25519.PublicKeySize {
		return errors.New("x is not 32 bytes")
	}
	if err := checkEd25519PublicKey(x); err != nil {
		return fmt.Errorf("x: %w", err)
	}
	m.alg, m.edPublic = AlgEd25519, ed25519.PublicKey(x)
	if d != nil {
		if len(d) != ed25519.SeedSize {
			return errors.New("d is not 32 bytes")
		}
		priv := ed25519.NewKeyFromSeed(d)
		if subtle.ConstantTimeCompare(priv[ed25519.SeedSize:], x) != 1 {
			return errors.New("d does not match x")
		}
		m.edPrivate = priv
	}
	return nil
}

// p256Into checks j as a P-256 key, whose point has the coordinates x and
// j.Y and whose private scalar is d (nil for none), and sets it in m.
func (j *jwkJSON) p256Into(m *jwkMaterial, x, d []byte) error {
	if j.Alg != "" && j.Alg != "ES256" {
		return errors.New("alg does not fit a P-256 key")
	}
	y, err := decodeB64URL(j.Y)
	if err != nil || len(x) != 32 || len(y) != 32 {
		return errors.New("x and y are not 32 bytes of unpadded base64url each")
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return errors.New("x and y are not a point of P-256")
	}
	m.alg, m.ecPublic = AlgECDSAP256SHA256, pub
	if d != nil {
		priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d)
		if err != nil {
			return errors.New("d is not a P-256 private key")
		}
		if !priv.PublicKey.Equal(pub) {
			return errors.New("d does not match x and y")
		}
		m.ecPrivate = priv
	}
	return nil
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

// MarshalJSON writes k as a JWK without its private part, which is never
// marshaled; its other members are k's own, key_ops too: GenerateJWK's
// ["sign"], which a verifier's purpose check refuses, or a parsed key's
// as it was parsed. To publish a key (a JWK Set for its receivers),
// marshal its Public half, whose key_ops are ["verify"].
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
	return (m.adcpUse == adCPUseRequestSigning || m.adcpUse == adCPUseWebhookSigning) && slices.Contains(m.keyOps, jwkKeyOpVerify)
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
