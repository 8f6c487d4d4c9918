package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"

	"github.com/courier-go/courier/ack"
)

// PayloadKey is an AES-256-GCM key that seals stored payloads. Its
// material is held behind a function value, so fmt, slog and every other
// printer show the id and at most an address, never the key.
type PayloadKey struct {
	id   string
	aead func() cipher.AEAD
}

// NewPayloadKey returns the key named id (a token, stored with every row it
// seals) over 32 secret bytes.
func NewPayloadKey(id string, secret []byte) (PayloadKey, error) {
	if !ack.IsToken(id) || len(id) > 64 {
		return PayloadKey{}, configError("payload key id must be 1-64 of A-Z a-z 0-9 _ . : -")
	}
	if len(secret) != 32 {
		return PayloadKey{}, configError("payload key must be 32 bytes (AES-256)")
	}
	block, err := aes.NewCipher(secret)
	if err != nil {
		return PayloadKey{}, configError("payload key rejected by AES")
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return PayloadKey{}, configError("payload key rejected by GCM")
	}
	return PayloadKey{id: id, aead: func() cipher.AEAD { return aead }}, nil
}

// ID returns the key's id.
func (k PayloadKey) ID() string { return k.id }

// Encryption seals the payloads the outbox stores. New rows are sealed
// with Current; rows sealed with any key in Keys can be opened, so a
// rotation adds a key, makes it Current, and drops the old one once no
// undelivered row needs it. The delivery's identity (notification id and
// endpoint) is bound as associated data: a sealed payload moved to another
// row does not open. A row that cannot be opened is quarantined with code
// payload_unreadable.
type Encryption struct {
	Current string
	Keys    []PayloadKey
}

func (e *Encryption) validate() error {
	if e == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, k := range e.Keys {
		if k.aead == nil {
			return configError("Encryption.Keys holds a key not made by NewPayloadKey")
		}
		if seen[k.id] {
			return configError("Encryption.Keys holds two keys with one id")
		}
		seen[k.id] = true
	}
	if !seen[e.Current] {
		return configError("Encryption.Current names no key of Encryption.Keys")
	}
	return nil
}

func (e *Encryption) key(id string) (PayloadKey, bool) {
	for _, k := range e.Keys {
		if k.id == id {
			return k, true
		}
	}
	return PayloadKey{}, false
}

// payloadAAD binds a sealed payload to its delivery.
func payloadAAD(notificationID, endpoint string) []byte {
	return []byte("courier.outbox.payload.v1\x00" + notificationID + "\x00" + endpoint)
}

// seal returns the stored form of payload and the id of the key that
// sealed it ("" without encryption).
func (e *Encryption) seal(payload []byte, notificationID, endpoint string) ([]byte, string, error) {
	if e == nil {
		return payload, "", nil
	}
	k, _ := e.key(e.Current)
	aead := k.aead()
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(payload)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, "", err
	}
	return aead.Seal(nonce, nonce, payload, payloadAAD(notificationID, endpoint)), k.id, nil
}

// errUnreadable is a stored payload that cannot be opened.
var errUnreadable = errors.New("store: payload cannot be opened")

// open returns a stored payload's plaintext.
func (e *Encryption) open(stored []byte, keyID, notificationID, endpoint string) ([]byte, error) {
	if keyID == "" {
		return stored, nil
	}
	if e == nil {
		return nil, errUnreadable
	}
	k, ok := e.key(keyID)
	if !ok {
		return nil, errUnreadable
	}
	aead := k.aead()
	n := aead.NonceSize()
	if len(stored) < n {
		return nil, errUnreadable
	}
	plain, err := aead.Open(nil, stored[:n], stored[n:], payloadAAD(notificationID, endpoint))
	if err != nil {
		return nil, errUnreadable
	}
	return plain, nil
}
