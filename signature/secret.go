package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Bounds of a Secret, in bytes. AdCP requires at least 32 characters for
// both legacy credentials (the HMAC secret and the bearer token).
const (
	minSecretBytes = 32
	maxSecretBytes = 4096
)

// Secret is a shared secret of the AdCP legacy schemes: the HMAC key of
// [NewAdCPHMACSigner] and [NewAdCPHMACVerifier] or the token of
// [NewBearerSigner] and [NewBearerVerifier]. Build it with [ParseSecret]. It prints and logs
// redacted; the zero value is not a secret.
type Secret struct {
	m sealed[*secretMaterial]
}

type secretMaterial struct {
	id     string
	value  []byte
	digest [sha256.Size]byte // SHA-256 of value, compared by the bearer verifier
}

// ParseSecret validates a shared secret: 32 to 4096 bytes of
// visible ASCII (no spaces or control characters, so it is safe in an
// Authorization header), not one character repeated.
//
// id names the secret in Principal.KeyID and in logs. If empty, it is a
// fingerprint that reveals nothing about the secret: "secret:<16 hex>".
//
// Errors are cases of courier.CodeConfigInvalid and never contain the
// secret.
func ParseSecret(id, value string) (Secret, error) {
	if err := checkSecret(value); err != nil {
		return Secret{}, configError("secret: " + err.Error())
	}
	m := &secretMaterial{id: id, value: []byte(value), digest: sha256.Sum256([]byte(value))}
	if m.id == "" {
		mac := hmac.New(sha256.New, m.value)
		mac.Write([]byte("courier secret id"))
		m.id = "secret:" + hex.EncodeToString(mac.Sum(nil)[:8])
	}
	return Secret{m: seal(m)}, nil
}

func checkSecret(v string) error {
	if len(v) < minSecretBytes || len(v) > maxSecretBytes {
		return fmt.Errorf("secret is %d bytes, want %d to %d", len(v), minSecretBytes, maxSecretBytes)
	}
	same := true
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] >= 0x7f {
			return errors.New("secret holds a space, a control or a non-ASCII byte")
		}
		same = same && v[i] == v[0]
	}
	if same {
		return errors.New("secret repeats one character")
	}
	return nil
}

// ID returns the secret's id: the one given to ParseSecret or its
// fingerprint.
func (s Secret) ID() string {
	if s.m == nil {
		return ""
	}
	return s.m().id
}

// String describes the secret without its bytes.
func (s Secret) String() string { return fmt.Sprintf("Secret(%q %s)", s.ID(), redacted) }
