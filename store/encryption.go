package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"slices"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/wire"
)

// PayloadKey is an AES-256-GCM key that seals stored payloads, and the key
// of their stored digests. Its material is held behind function values, so
// fmt, slog and every other printer show the id and at most an address,
// never the key.
type PayloadKey struct {
	id     string
	aead   func() cipher.AEAD
	digest func(payload []byte, notificationID, endpoint string) [sha256.Size]byte
	ack    func(deliveryID int64, ackSHA256 string) [sha256.Size]byte
	record func(sender, dedupeKey, payloadSHA256 string) [sha256.Size]byte
}

// NewPayloadKey returns the key named id (a token, stored with every row it
// seals) over 32 secret bytes. 32 zero bytes are refused: that is a secret
// that failed to load (a buffer never filled), and a key anyone could open
// the payloads with.
func NewPayloadKey(id string, secret []byte) (PayloadKey, error) {
	if !wire.IsToken(id) || len(id) > 64 {
		return PayloadKey{}, configError("payload key id must be 1-64 of A-Z a-z 0-9 _ . : -")
	}
	if len(secret) != 32 {
		return PayloadKey{}, configError("payload key must be 32 bytes (AES-256)")
	}
	if !slices.ContainsFunc(secret, func(b byte) bool { return b != 0 }) {
		return PayloadKey{}, configError("payload key is 32 zero bytes: a secret that was never loaded")
	}
	block, err := aes.NewCipher(secret)
	if err != nil {
		return PayloadKey{}, configError("payload key rejected by AES")
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return PayloadKey{}, configError("payload key rejected by GCM")
	}
	// One HMAC key per use, each derived for this key id alone.
	var macKeys [3][]byte
	for i, info := range []string{digestInfo, ackDigestInfo, recordDigestInfo} {
		if macKeys[i], err = hkdf.Key(sha256.New, secret, nil, info+id, sha256.Size); err != nil {
			return PayloadKey{}, configError("payload key rejected by HKDF")
		}
	}
	digestKey, ackKey, recordKey := macKeys[0], macKeys[1], macKeys[2]
	return PayloadKey{
		id:   id,
		aead: func() cipher.AEAD { return aead },
		digest: func(payload []byte, notificationID, endpoint string) [sha256.Size]byte {
			return keyedDigest(digestKey, payload, notificationID, endpoint)
		},
		ack: func(deliveryID int64, ackSHA256 string) [sha256.Size]byte {
			return keyedSum(ackKey, func(h hash.Hash) {
				var id [8]byte
				binary.BigEndian.PutUint64(id[:], uint64(deliveryID))
				h.Write(id[:])
				h.Write([]byte(ackSHA256))
			})
		},
		record: func(sender, dedupeKey, payloadSHA256 string) [sha256.Size]byte {
			return keyedSum(recordKey, func(h hash.Hash) { writePrefixed(h, sender, dedupeKey, payloadSHA256) })
		},
	}, nil
}

// keyedSum is the HMAC-SHA256, under key, of what write writes.
func keyedSum(key []byte, write func(h hash.Hash)) [sha256.Size]byte {
	mac := hmac.New(sha256.New, key)
	write(mac)
	var sum [sha256.Size]byte
	mac.Sum(sum[:0])
	return sum
}

// digestInfo is the HKDF info of a key's digest key, followed by the key's
// id: the digest key is the payload key's, tagged for this one use and
// this one key id, and independent of the AES key it is derived from.
const digestInfo = "courier.outbox.payload-digest.v1\x00"

// ackDigestInfo is the HKDF info of a key's Ack digest key. Courier's
// own Ack is computed from the notification id and the payload's SHA-256
// alone, so the plain digest of a sealed delivery's Ack would confirm a
// guessed payload as surely as the payload's own digest: a sealed row
// stores its Ack's digest keyed, like its payload's, and over the row's id
// too, so that the deliveries of one notification to several endpoints do
// not show, by equal Ack digests, which carry the same payload. (v1 keyed
// the Ack's digest alone.)
const ackDigestInfo = "courier.outbox.ack-digest.v2\x00"

// recordDigestInfo is the HKDF info of a key's inbox digest key. An inbox
// record keeps the digest of what was received under its key, to tell a
// redelivery from a collision; under encryption it is keyed, over the
// record's identity too, so that neither a guessed body nor two records
// with one body show.
const recordDigestInfo = "courier.inbox.payload-digest.v1\x00"

// keyedDigest is the digest stored for a sealed payload: HMAC-SHA256 under
// the key's digest key over the delivery's identity and the payload.
// Without the key nobody can compute it, so it neither reveals a guessable
// payload nor shows two rows with one payload; with the key, enqueue and
// claim recompute it to compare a payload with the row.
func keyedDigest(macKey, payload []byte, notificationID, endpoint string) [sha256.Size]byte {
	return keyedSum(macKey, func(h hash.Hash) {
		writePrefixed(h, notificationID, endpoint)
		h.Write(payload)
	})
}

// ID returns the key's id.
func (k PayloadKey) ID() string { return k.id }

// Encryption seals the payloads the outbox stores, and nothing else: a
// row's endpoint URL, notification id and ordering key stay
// readable in the database (keep a credential out of an endpoint URL, or
// the database as closed as the credential). New rows are sealed
// with Current; rows sealed with any key in Keys can be opened, so a
// rotation adds a key and makes it Current. Keep the old one in Keys for
// as long as any stored delivery sealed under it exists, delivered or
// not, until Prune deletes them (as for the inbox's records, below): an
// unfinished row whose key is gone cannot be sent, and a repeated Enqueue
// or Publish of any row whose key is gone, a succeeded one too, cannot be
// compared with it and is refused as an idempotency collision (the error
// names the key); so is one of a row that does not open under the key
// Keys holds for its id. The delivery's identity (notification id and
// endpoint) and the signing key id it is sent with (EnqueueParams.KeyID)
// are bound as associated data: a sealed payload moved to another row,
// or whose row is changed to be signed with another key, does not open
// (rows sealed before the signing key id was bound open as they were
// sealed, bound to the identity alone). A row that cannot be opened is
// quarantined with code payload_unreadable (Outbox.Health says so: blocked,
// payload_unreadable): its key is gone, or Keys holds other bytes under
// its id. That is a key's fault, not the row's,
// so once the key is configured again (in every process that claims)
// Outbox.Redrive sends the row again; a row redriven while its key is
// still wrong, or whose sealed bytes or bound columns were altered, is
// quarantined again at its next claim.
//
// A sealed row's stored digest (Delivery.PayloadSHA256) is keyed too:
// HMAC-SHA256 under a key derived (HKDF) from the payload key and tagged
// with its id, over the delivery's identity and the payload. The database
// then reveals neither a payload anyone could guess and hash nor which rows
// carry the same one. Claims recompute it under the row's key before
// sending (a mismatch is quarantined with code integrity_mismatch), and so
// does an enqueue that finds its delivery already stored, so the same
// payload again stays a no-op across a rotation.
//
// The receivers' inbox records (and the publish API's idempotency records)
// are kept the same way: the digest of what was received is keyed, over
// the record's sender and dedupe key, and the stored answer is sealed,
// since courier's Ack holds the body's plain digest. A redelivery is
// compared and answered under the key its record was kept with, so keep a
// retired key in Keys for as long as the inbox keeps records (its Prune
// window): a redelivery whose record's key is gone is refused with code
// payload_unreadable (a receiver answers 503 with that code, and logs
// the key's id) rather than processed again or taken for a collision.
// So is a redelivery to a completed record whose key id Keys holds over
// other bytes (a key generated again under an id in use): its answer,
// sealed for the record and not for the body, does not open, which a
// record of another body under the right key always does. A record
// still processing (a two-phase Inbox claim not yet completed) stores no
// answer to tell by: a body whose digest does not match it is taken for
// a collision, as without encryption, and under a key id over other
// bytes so is the same body. Records kept before
// Encryption was set stay as they were and are read so.
//
// Store.KeysInUse says which key ids stored rows are still kept under: a
// retired key may leave Keys once it counts none.
//
// Set Encryption, or add a key, in every process that shares the
// database before any of them seals with it, and only once every process
// runs a courier that knows payload encryption: a process without the key
// cannot open what another sealed, and one of a courier before it would
// compare its plain digest with a sealed record's keyed one and answer a
// genuine redelivery as an idempotency collision.
type Encryption struct {
	Current string
	Keys    []PayloadKey
}

// KeysInUse counts, by payload key id, the rows kept under each key (see
// Encryption): the deliveries whose payload it seals, whatever their
// status, and the inbox records (the receivers' and the publish API's
// idempotency records) it keys and seals. Rows kept as sent or received,
// without a key, are not counted. A key retired from Current may leave
// Encryption.Keys, in every process, once it counts none here; until
// then, rows under it cannot be opened without it. Prune (Outbox.Prune,
// Inbox.Prune) deletes the finished ones in time; a failed or quarantined
// delivery is not finished until an operator redrives or cancels it
// (Outbox.Redrive, Outbox.Cancel), so it keeps its key in use till then.
// It reads the outbox and
// the inbox whole: an operator's tool, not a probe.
func (s *Store) KeysInUse(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		KeyID string `db:"key_id"`
		N     int    `db:"n"`
	}
	if err := s.selectRows(ctx, s.db, "payload_keys_in_use", nil, &rows); err != nil {
		return nil, err
	}
	inUse := make(map[string]int, len(rows))
	for _, r := range rows {
		inUse[r.KeyID] = r.N
	}
	return inUse, nil
}

func (e *Encryption) validate() error {
	if e == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, k := range e.Keys {
		if k.aead == nil || k.digest == nil {
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
	if e == nil {
		return PayloadKey{}, false
	}
	for _, k := range e.Keys {
		if k.id == id {
			return k, true
		}
	}
	return PayloadKey{}, false
}

// payloadAAD binds a sealed payload to its delivery and to the signing
// configuration it is sent with (EnqueueParams.KeyID): the notification
// id, the endpoint and the signing key id. The key signs for an account
// of the receiver, which one URL may serve for several: a payload whose
// row is changed to be signed with another key does not open. None of
// the three holds a NUL byte: no two triples make the same bytes.
func payloadAAD(notificationID, endpoint, signingKeyID string) []byte {
	return []byte("courier.outbox.payload.v2\x00" + notificationID + "\x00" + endpoint + "\x00" + signingKeyID)
}

// payloadAADv1 is the associated data payloads were sealed with before
// the signing key id was bound: the notification id and the endpoint.
// Rows sealed so still open under it.
func payloadAADv1(notificationID, endpoint string) []byte {
	return []byte("courier.outbox.payload.v1\x00" + notificationID + "\x00" + endpoint)
}

// seal returns the stored form of payload, for the delivery
// (notificationID, endpoint) signed with signingKeyID, and the id of the
// key that sealed it ("" without encryption).
func (e *Encryption) seal(payload []byte, notificationID, endpoint, signingKeyID string) ([]byte, string, error) {
	if e == nil {
		return payload, "", nil
	}
	k, _ := e.key(e.Current)
	sealed, err := k.seal(payload, payloadAAD(notificationID, endpoint, signingKeyID))
	return sealed, k.id, err
}

// seal returns plain sealed with k for aad: a fresh random nonce followed
// by the ciphertext.
func (k PayloadKey) seal(plain, aad []byte) ([]byte, error) {
	aead := k.aead()
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, plain, aad), nil
}

// errUnreadable is a stored payload that cannot be opened.
var errUnreadable = errors.New("store: payload cannot be opened")

// open returns the plaintext of a payload stored under the key named
// keyID ("": as sent) for the delivery (notificationID, endpoint) signed
// with signingKeyID. A payload sealed before the signing key id was bound
// opens under the associated data it was sealed with.
func (e *Encryption) open(stored []byte, keyID, notificationID, endpoint, signingKeyID string) ([]byte, error) {
	if keyID == "" {
		return stored, nil
	}
	k, ok := e.key(keyID)
	if !ok {
		return nil, errUnreadable
	}
	plain, err := k.open(stored, payloadAAD(notificationID, endpoint, signingKeyID))
	if err != nil {
		plain, err = k.open(stored, payloadAADv1(notificationID, endpoint))
	}
	return plain, err
}

// open returns what k sealed for aad, or errUnreadable.
func (k PayloadKey) open(stored, aad []byte) ([]byte, error) {
	aead := k.aead()
	n := aead.NonceSize()
	if len(stored) < n {
		return nil, errUnreadable
	}
	plain, err := aead.Open(nil, stored[:n], stored[n:], aad)
	if err != nil {
		return nil, errUnreadable
	}
	return plain, nil
}

// digest returns the stored digest of a payload about to be sealed with
// the key named keyID ("": stored as sent), in lowercase hex: the
// payload's SHA-256 for a plaintext row, its keyed digest for a sealed one.
func (e *Encryption) digest(payload []byte, keyID, notificationID, endpoint string) string {
	if keyID == "" {
		sum := sha256.Sum256(payload)
		return hex.EncodeToString(sum[:])
	}
	k, _ := e.key(keyID)
	sum := k.digest(payload, notificationID, endpoint)
	return hex.EncodeToString(sum[:])
}

// ackDigest returns what delivery deliveryID, sealed under keyID ("" for
// none), stores of the Ack it succeeded with, whose SHA-256 is ackSHA256
// ("" for a profile without an Ack, stored as ""): the digest itself for
// a plaintext row, and for a sealed one the HMAC under the key's Ack
// digest key of the row's id and the digest, in lowercase hex. A sealed
// row whose key is gone stores "".
func (e *Encryption) ackDigest(ackSHA256, keyID string, deliveryID int64) string {
	if keyID == "" || ackSHA256 == "" {
		return ackSHA256
	}
	k, ok := e.key(keyID)
	if !ok {
		return ""
	}
	sum := k.ack(deliveryID, ackSHA256)
	return hex.EncodeToString(sum[:])
}

// errDigestKeyGone is a row sealed under a key Encryption no longer holds:
// no payload can be compared with it.
var errDigestKeyGone = errors.New("store: the row's payload key is not configured")

// matches reports, in constant time, whether payload is the one whose
// digest a row stores, the row sealed under keyID ("" for none). A sealed
// row's digest is keyed under its own key, whichever key is Current now;
// a sealed row whose key is gone is errDigestKeyGone.
func (e *Encryption) matches(payload []byte, hexDigest, keyID, notificationID, endpoint string) (bool, error) {
	var sum [sha256.Size]byte
	switch k, ok := e.key(keyID); {
	case keyID == "":
		sum = sha256.Sum256(payload)
	case !ok:
		return false, errDigestKeyGone
	default:
		sum = k.digest(payload, notificationID, endpoint)
	}
	stored, err := hex.DecodeString(hexDigest)
	return err == nil && subtle.ConstantTimeCompare(sum[:], stored) == 1, nil
}

// record is what an inbox record of k stores, keyed under the key named
// keyID ("": as received): the digest of what was received under k's
// dedupe key, and the record's answer (nil while it is processing).
type record struct {
	digest string
	keyID  string
	answer []byte
}

// recordAAD binds a sealed answer to its inbox record.
func recordAAD(sender, dedupeKey string) []byte {
	return []byte("courier.inbox.answer.v1\x00" + sender + "\x00" + dedupeKey)
}

// sealRecord returns what a record of k with answer (nil for none yet)
// stores: as received without encryption; with it, the digest keyed and
// the answer sealed under the Current key, both bound to the record's
// identity. The answer is sealed too because it may hold the body's plain
// digest (courier's Ack does).
func (e *Encryption) sealRecord(k protocol.InboxKey, answer []byte) (record, error) {
	if e == nil {
		return record{digest: k.PayloadSHA256, answer: answer}, nil
	}
	key, _ := e.key(e.Current)
	r := record{keyID: key.id}
	sum := key.record(k.Sender, k.Key, k.PayloadSHA256)
	r.digest = hex.EncodeToString(sum[:])
	if answer != nil {
		sealed, err := key.seal(answer, recordAAD(k.Sender, k.Key))
		if err != nil {
			return record{}, err
		}
		r.answer = sealed
	}
	return r, nil
}

// errRecordKeyGone is an inbox record kept under the key named keyID,
// which Encryption no longer holds: a redelivery can be neither compared
// with it nor answered from it until the key is configured again. The
// error names the key, for the operator to put back.
func errRecordKeyGone(keyID string) error {
	return &coded.Error{Code: courier.CodePayloadUnreadable,
		Msg: "store: the inbox record is sealed under payload key " + keyID + ", which Encryption.Keys no longer holds; keep retired keys for as long as inbox records are"}
}

// errRecordKeyWrong is a completed inbox record whose answer does not
// open under the key Encryption holds for the record's key id, keyID:
// other bytes under that id than the record was kept with (a key
// generated again under an id in use), or an altered record. Its digest
// tells nothing then, so a redelivery is refused as for a key that is
// gone.
func errRecordKeyWrong(keyID string) error {
	return &coded.Error{Code: courier.CodePayloadUnreadable,
		Msg: "store: the inbox record's answer does not open under payload key " + keyID + " as Encryption.Keys holds it: the key's bytes are not those the record was kept with, or the record was altered"}
}

// openRecord reports, in constant time, whether k is what record r was
// stored for, and if so returns r's answer as it was given. A sealed
// record's digest that does not match is a collision only when the
// record's key is the one it was kept with: a completed record shows
// whether it is, as its answer is sealed for the record's identity alone,
// not for the body, and so opens under the right key whatever body comes
// (errRecordKeyWrong when it does not). A record still processing stores
// no answer yet, and a mismatch with it is a collision.
func (e *Encryption) openRecord(k protocol.InboxKey, r record) (same bool, answer []byte, err error) {
	want := k.PayloadSHA256
	key, ok := e.key(r.keyID)
	switch {
	case r.keyID == "":
	case !ok:
		return false, nil, errRecordKeyGone(r.keyID)
	default:
		sum := key.record(k.Sender, k.Key, k.PayloadSHA256)
		want = hex.EncodeToString(sum[:])
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(r.digest)) != 1 {
		if r.keyID != "" && r.answer != nil {
			if _, err := key.open(r.answer, recordAAD(k.Sender, k.Key)); err != nil {
				return false, nil, errRecordKeyWrong(r.keyID)
			}
		}
		return false, nil, nil
	}
	if r.keyID == "" || r.answer == nil {
		return true, r.answer, nil
	}
	answer, err = key.open(r.answer, recordAAD(k.Sender, k.Key))
	if err != nil {
		return true, nil, &coded.Error{Code: courier.CodePayloadUnreadable, Msg: "store: the inbox record's answer cannot be opened under payload key " + r.keyID, Err: err}
	}
	if answer == nil {
		answer = []byte{} // an empty answer, as stored
	}
	return true, answer, nil
}

// writePrefixed writes each part to h after its length (8 bytes, big
// endian), so that no two lists of parts write the same bytes.
func writePrefixed(h hash.Hash, parts ...string) {
	var n [8]byte
	for _, part := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
}
