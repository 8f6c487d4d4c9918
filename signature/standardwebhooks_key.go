package signature

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Prefixes of the Standard Webhooks key serializations.
const (
	prefixStandardWebhooksSecret     = "whsec_" // HMAC-SHA256 secret (v1)
	prefixStandardWebhooksPrivateKey = "whsk_"  // Ed25519 private key (v1a)
	prefixStandardWebhooksPublicKey  = "whpk_"  // Ed25519 public key (v1a)
)

// Bounds of a Standard Webhooks HMAC secret, in decoded bytes, as the
// specification sets them (192 to 512 bits).
const (
	minStandardWebhooksSecretBytes = 24
	maxStandardWebhooksSecretBytes = 64
)

type swKind int

const (
	swSecret swKind = iota + 1
	swPrivate
	swPublic
)

// StandardWebhooksKey is one Standard Webhooks key: an HMAC secret
// ("whsec_"), an Ed25519 private key ("whsk_") or an Ed25519 public key
// ("whpk_"). Build it with [ParseStandardWebhooksKey]. It prints and logs
// redacted; the zero value is not a key.
type StandardWebhooksKey struct {
	m sealed[*swKeyMaterial]
}

type swKeyMaterial struct {
	id      string
	kind    swKind
	secret  []byte
	private ed25519.PrivateKey
	public  ed25519.PublicKey
}

// ParseStandardWebhooksKey parses a serialized Standard Webhooks key:
//
//   - "whsec_" + standard padded base64 of a 24 to 64 byte HMAC secret;
//   - "whsk_" + standard padded base64 of an Ed25519 private key, either the
//     32-byte seed or the 64-byte seed||public form (whose public half must
//     match the seed);
//   - "whpk_" + standard padded base64 of a 32-byte Ed25519 public key,
//     not one of the points of small order (order dividing 8), in any of
//     their encodings: no one holds their private half, and with one
//     anyone forges signatures the verifier accepts.
//
// id names the key in Principal.KeyID and in logs. If empty, it is a
// fingerprint that reveals nothing about the key: "whsec:<16 hex>" for a
// secret, "ed25519:<16 hex>" of the public key for either half of an Ed25519
// pair (so a signer's and a verifier's ids agree).
//
// Errors are cases of courier.CodeConfigInvalid and never contain the
// encoded key.
func ParseStandardWebhooksKey(id, encoded string) (StandardWebhooksKey, error) {
	m, err := parseSWKey(encoded)
	if err != nil {
		return StandardWebhooksKey{}, configError("standard webhooks key: " + err.Error())
	}
	m.id = id
	if m.id == "" {
		m.id = m.fingerprint()
	}
	return StandardWebhooksKey{m: seal(m)}, nil
}

// NewStandardWebhooksKeyPair returns a fresh Ed25519 key pair for the v1a
// scheme: the "whsk_" private key the sender signs with (its 64-byte
// seed||public form) and the "whpk_" public key receivers verify with.
func NewStandardWebhooksKeyPair() (private, public string) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic("signature: " + err.Error()) // crypto/rand never fails since Go 1.24
	}
	return prefixStandardWebhooksPrivateKey + base64.StdEncoding.EncodeToString(priv),
		prefixStandardWebhooksPublicKey + base64.StdEncoding.EncodeToString(pub)
}

// NewStandardWebhooksSecret returns a fresh random "whsec_" secret of 32 bytes.
func NewStandardWebhooksSecret() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails since Go 1.24
	return prefixStandardWebhooksSecret + base64.StdEncoding.EncodeToString(b)
}

func parseSWKey(encoded string) (*swKeyMaterial, error) {
	switch {
	case encoded == "":
		return nil, errors.New(`key is empty: want a "whsec_", "whsk_" or "whpk_" key (is the variable or file that holds it set?)`)
	case strings.TrimSpace(encoded) != encoded:
		// A key read from a file keeps the file's last newline, and one
		// pasted may keep a space: say so rather than blame its encoding.
		return nil, errors.New("key has white space around it (a file's last newline?): trim it")
	}
	prefix, body, ok := cutSWPrefix(encoded)
	if !ok {
		return nil, errors.New(`want a "whsec_", "whsk_" or "whpk_" prefix`)
	}
	raw, err := decodeStdBase64(body)
	if err != nil {
		return nil, errors.New("key is not standard padded base64")
	}
	switch prefix {
	case prefixStandardWebhooksSecret:
		if len(raw) < minStandardWebhooksSecretBytes || len(raw) > maxStandardWebhooksSecretBytes {
			return nil, fmt.Errorf("secret is %d bytes, want %d to %d", len(raw), minStandardWebhooksSecretBytes, maxStandardWebhooksSecretBytes)
		}
		return &swKeyMaterial{kind: swSecret, secret: raw}, nil
	case prefixStandardWebhooksPrivateKey:
		var priv ed25519.PrivateKey
		switch len(raw) {
		case ed25519.SeedSize:
			priv = ed25519.NewKeyFromSeed(raw)
		case ed25519.PrivateKeySize:
			priv = ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
			if subtle.ConstantTimeCompare(priv[ed25519.SeedSize:], raw[ed25519.SeedSize:]) != 1 {
				return nil, errors.New("private key's public half does not match its seed")
			}
		default:
			return nil, fmt.Errorf("private key is %d bytes, want %d or %d", len(raw), ed25519.SeedSize, ed25519.PrivateKeySize)
		}
		return &swKeyMaterial{kind: swPrivate, private: priv, public: priv.Public().(ed25519.PublicKey)}, nil
	default: // whpk_
		if len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("public key is %d bytes, want %d", len(raw), ed25519.PublicKeySize)
		}
		if err := checkEd25519PublicKey(raw); err != nil {
			return nil, err
		}
		return &swKeyMaterial{kind: swPublic, public: ed25519.PublicKey(raw)}, nil
	}
}

func cutSWPrefix(s string) (prefix, body string, ok bool) {
	for _, p := range []string{prefixStandardWebhooksSecret, prefixStandardWebhooksPrivateKey, prefixStandardWebhooksPublicKey} {
		if b, found := strings.CutPrefix(s, p); found {
			return p, b, true
		}
	}
	return "", "", false
}

func (m *swKeyMaterial) fingerprint() string {
	if m.kind == swSecret {
		mac := hmac.New(sha256.New, m.secret)
		mac.Write([]byte("courier standard-webhooks key id"))
		return "whsec:" + hex.EncodeToString(mac.Sum(nil)[:8])
	}
	sum := sha256.Sum256(m.public)
	return "ed25519:" + hex.EncodeToString(sum[:8])
}

// ID returns the key's id: the one given to ParseStandardWebhooksKey or its
// fingerprint.
func (k StandardWebhooksKey) ID() string {
	if k.m == nil {
		return ""
	}
	return k.m().id
}

// Public returns the key a verifier holds for k: the public half of a "whsk_"
// private key (with the same id), or k itself for a secret or public key.
func (k StandardWebhooksKey) Public() StandardWebhooksKey {
	if k.m == nil || k.m().kind != swPrivate {
		return k
	}
	return StandardWebhooksKey{m: seal(&swKeyMaterial{id: k.m().id, kind: swPublic, public: k.m().public})}
}

func (k StandardWebhooksKey) kindName() string {
	if k.m == nil {
		return "invalid"
	}
	switch k.m().kind {
	case swSecret:
		return "whsec"
	case swPrivate:
		return "whsk"
	}
	return "whpk"
}

// String describes the key without its bytes.
func (k StandardWebhooksKey) String() string {
	return fmt.Sprintf("StandardWebhooksKey(%s %q %s)", k.kindName(), k.ID(), redacted)
}

// decodeStdBase64 decodes standard, padded base64 and nothing else: unlike
// encoding/base64 it refuses embedded CR and LF.
func decodeStdBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("illegal newline in base64")
	}
	return base64.StdEncoding.Strict().DecodeString(s)
}
