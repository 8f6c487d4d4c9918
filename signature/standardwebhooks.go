package signature

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/courier-go/courier"
)

// Standard Webhooks header names.
const (
	headerWebhookID        = "webhook-id"
	headerWebhookTimestamp = "webhook-timestamp"
	headerWebhookSignature = "webhook-signature"
)

// Svix's brand of the Standard Webhooks headers: the same values under
// other names, as Svix sends them. A standardWebhooksVerifier accepts
// either brand; the signer writes the webhook-* brand.
const (
	headerSvixID        = "svix-id"
	headerSvixTimestamp = "svix-timestamp"
	headerSvixSignature = "svix-signature"
)

// swBrand is the names of one brand of the three headers.
type swBrand struct{ id, timestamp, signature string }

var (
	webhookBrand = swBrand{headerWebhookID, headerWebhookTimestamp, headerWebhookSignature}
	svixBrand    = swBrand{headerSvixID, headerSvixTimestamp, headerSvixSignature}
)

// defaultStandardWebhooksTolerance is how far webhook-timestamp may be from
// the verifier's clock, either way.
const defaultStandardWebhooksTolerance = 5 * time.Minute

// maxWebhookIDBytes bounds webhook-id (a courier notification id is at most
// 256 bytes).
const maxWebhookIDBytes = 256

// maxSWSignatures bounds the signatures one webhook-signature header
// carries, and so the keys of one signer.
const maxSWSignatures = 16

// maxSWAsymmetric bounds the v1a (Ed25519) signatures of one header, and
// so the "whsk_" keys of one signer. Each costs the verifier an Ed25519
// check over the whole body for each of its public keys, work anyone who
// knows the time can ask of it: 4 covers a rotation's old and new key
// with room to spare.
const maxSWAsymmetric = 4

// standardWebhooksSigner is what NewStandardWebhooksSigner returns.
type standardWebhooksSigner struct {
	keys []StandardWebhooksKey
}

// NewStandardWebhooksSigner returns a Signer that signs requests with
// Standard Webhooks headers, with each of keys: "whsec_" secrets (v1) and
// "whsk_" private keys (v1a). Each key adds one signature to
// webhook-signature, in order, so during a rotation the request carries the
// new and the old signature. At least one key is required, and at most 16,
// of which at most 4 "whsk_" private keys: the verifier refuses a header
// with more than 16 signatures, or more than 4 v1a ones, so a signer with
// more keys would write headers no courier receiver accepts. A "whpk_"
// public key cannot sign. The signer is safe for concurrent use.
func NewStandardWebhooksSigner(keys ...StandardWebhooksKey) (Signer, error) {
	switch {
	case len(keys) == 0:
		return nil, configError("NewStandardWebhooksSigner: no keys")
	case len(keys) > maxSWSignatures:
		return nil, configError(fmt.Sprintf("NewStandardWebhooksSigner: %d keys, want at most %d (the signatures a verifier reads)", len(keys), maxSWSignatures))
	}
	private := 0
	for i, k := range keys {
		if k.m == nil {
			return nil, configError(fmt.Sprintf("NewStandardWebhooksSigner: key %d is not a parsed key", i))
		}
		switch k.m().kind {
		case swPublic:
			return nil, configError(fmt.Sprintf("NewStandardWebhooksSigner: key %d is a public key and cannot sign", i))
		case swPrivate:
			private++
		}
	}
	if private > maxSWAsymmetric {
		return nil, configError(fmt.Sprintf("NewStandardWebhooksSigner: %d whsk_ keys, want at most %d (the v1a signatures a verifier reads)", private, maxSWAsymmetric))
	}
	return &standardWebhooksSigner{keys: append([]StandardWebhooksKey(nil), keys...)}, nil
}

// Sign sets webhook-id (m.ID), webhook-timestamp (m.Time in unix seconds) and
// webhook-signature (one signature per configured key) on req.
func (s *standardWebhooksSigner) Sign(req *http.Request, m Message) error {
	if !validWebhookID(m.ID) {
		return permanentSigningError("standard webhooks: message id is empty, too long or not printable ASCII")
	}
	ts := m.Time.Unix()
	if ts < 0 {
		return permanentSigningError("standard webhooks: message time is before 1970")
	}
	tsText := strconv.FormatInt(ts, 10)

	var content []byte // built once, for the Ed25519 keys only
	sigs := make([]string, 0, len(s.keys))
	for _, k := range s.keys {
		switch k.m().kind {
		case swSecret:
			sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(swHMAC(k.m().secret, m.ID, tsText, m.Body)))
		case swPrivate:
			if content == nil {
				content = swContent(m.ID, tsText, m.Body)
			}
			sigs = append(sigs, "v1a,"+base64.StdEncoding.EncodeToString(ed25519.Sign(k.m().private, content)))
		}
	}
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	req.Header.Set(headerWebhookID, m.ID)
	req.Header.Set(headerWebhookTimestamp, tsText)
	req.Header.Set(headerWebhookSignature, strings.Join(sigs, " "))
	return nil
}

// StandardWebhooksVerifierConfig configures NewStandardWebhooksVerifier.
type StandardWebhooksVerifierConfig struct {
	// Sender names who signs with these keys; it is Principal.Sender, the
	// name receivers record its requests under: 1-256 bytes of UTF-8
	// without control characters (NUL, newline, tab, DEL or any other).
	// A Sender that is not such text is a configuration error. Required.
	Sender string
	// Keys are the accepted keys: "whsec_" secrets and "whpk_" public keys (a
	// "whsk_" private key is accepted and only its public half is kept).
	// During a rotation hold the old and the new key, under ids of their own
	// (one id over two keys is a configuration error: Principal.KeyID names the
	// one that verified); a request passes if any of its signatures matches
	// any key of the same version. Required.
	Keys []StandardWebhooksKey
	// Tolerance is how far webhook-timestamp may be from Now, either way:
	// from one second to one hour, counted in whole seconds (a fraction is
	// dropped); a negative one, one under a second or one over an hour is a
	// configuration error. Defaults to 5 minutes (when zero). A request
	// replayed within it is refused as a duplicate by the receiver's inbox
	// record alone, which must then outlive twice the tolerance:
	// store.Inbox.Prune keeps records at least 24 hours, hence the hour.
	Tolerance time.Duration
	// Now is the verifier's clock. Defaults to time.Now.
	Now func() time.Time
}

// withDefaults returns a copy of c with its zero fields set to their defaults.
func (c StandardWebhooksVerifierConfig) withDefaults() StandardWebhooksVerifierConfig {
	if c.Tolerance == 0 {
		c.Tolerance = defaultStandardWebhooksTolerance
	}
	c.Now = nowFunc(c.Now)
	return c
}

// standardWebhooksVerifier is what NewStandardWebhooksVerifier returns.
type standardWebhooksVerifier struct {
	cfg     StandardWebhooksVerifierConfig
	secrets []StandardWebhooksKey // v1
	publics []StandardWebhooksKey // v1a
}

// NewStandardWebhooksVerifier validates cfg and returns a Verifier that
// verifies Standard Webhooks signatures, under the webhook-* header names or
// Svix's svix-* names (svix-id, svix-timestamp, svix-signature). A request
// uses one brand: one that carries both is refused
// (courier.CodeSignatureMalformed) unless each header
// of one brand has exactly the field lines of its twin in the other, in
// which case both say the same thing and it is verified once. A
// signature header with more than 16 signatures, or more than 4 v1a
// (Ed25519) ones, is refused (courier.CodeSignatureMalformed), even when
// one of them would verify: each v1a signature costs an Ed25519 check of
// the whole body per public key, work anyone could ask for. The verifier is safe for concurrent
// use.
func NewStandardWebhooksVerifier(cfg StandardWebhooksVerifierConfig) (Verifier, error) {
	cfg = cfg.withDefaults()
	if err := checkSender("StandardWebhooksVerifierConfig", cfg.Sender); err != nil {
		return nil, err
	}
	if len(cfg.Keys) == 0 {
		return nil, configError("StandardWebhooksVerifierConfig.Keys is empty")
	}
	if err := checkTolerance("StandardWebhooksVerifierConfig", cfg.Tolerance); err != nil {
		return nil, err
	}
	v := &standardWebhooksVerifier{cfg: cfg}
	held := make(map[string]string, len(cfg.Keys)) // id: the fingerprint of the key a verifier holds under it
	for i, k := range cfg.Keys {
		if k.m == nil {
			return nil, configError(fmt.Sprintf("StandardWebhooksVerifierConfig.Keys[%d] is not a parsed key", i))
		}
		// Two keys under one id would leave the Principal's KeyID unable
		// to say which verified; a private key beside its own public key
		// is one key.
		fp := k.Public().m().fingerprint()
		if was, ok := held[k.ID()]; ok && was != fp {
			return nil, configError(fmt.Sprintf("StandardWebhooksVerifierConfig.Keys[%d]: key id %q appears twice, over other keys", i, printableID(k.ID())))
		}
		held[k.ID()] = fp
		if k.m().kind == swSecret {
			v.secrets = append(v.secrets, k)
		} else {
			v.publics = append(v.publics, k.Public())
		}
	}
	v.cfg.Keys = nil // held above, by kind
	return v, nil
}

// Verify checks req's Standard Webhooks headers, of either brand, against
// body. The Principal's MessageID is the signed webhook-id (or svix-id).
func (v *standardWebhooksVerifier) Verify(_ context.Context, req *http.Request, body []byte) (Principal, error) {
	names, err := swBrandOf(req.Header)
	if err != nil {
		return Principal{}, err
	}
	id, err := oneHeader(req.Header, names.id)
	if err != nil {
		return Principal{}, err
	}
	if !validWebhookID(id) {
		return Principal{}, reject(courier.CodeSignatureMalformed, names.id+" is too long or not printable ASCII")
	}
	tsText, err := oneHeader(req.Header, names.timestamp)
	if err != nil {
		return Principal{}, err
	}
	ts, ok := parseUnixSeconds(tsText)
	if !ok {
		return Principal{}, reject(courier.CodeSignatureMalformed, names.timestamp+" is not unix seconds")
	}
	header, err := oneHeader(req.Header, names.signature)
	if err != nil {
		return Principal{}, err
	}
	if !withinTolerance(v.cfg.Now(), ts, v.cfg.Tolerance) {
		return Principal{}, reject(courier.CodeSignatureTimestamp, names.timestamp+" is outside the tolerance")
	}
	entries := strings.Fields(header)
	if len(entries) > maxSWSignatures {
		return Principal{}, reject(courier.CodeSignatureMalformed, names.signature+" carries too many signatures")
	}
	asymmetric := 0
	for _, e := range entries {
		if strings.HasPrefix(e, "v1a,") {
			asymmetric++
		}
	}
	if asymmetric > maxSWAsymmetric {
		return Principal{}, reject(courier.CodeSignatureMalformed, names.signature+" carries too many v1a signatures")
	}
	if k, ok := v.match(entries, id, tsText, body); ok {
		return v.principal(k, id), nil
	}
	return Principal{}, reject(courier.CodeSignatureMismatch, "no signature matches a configured key")
}

// match returns the key that made one of the signatures entries, over
// the message id, timestamp ts (as sent) and body: a v1 entry is checked
// against the secrets, a v1a entry against the public keys, entry by
// entry. An entry that is not a version, a comma and a signature of its
// version's size in base64 is passed over.
func (v *standardWebhooksVerifier) match(entries []string, id, ts string, body []byte) (StandardWebhooksKey, bool) {
	var macs [][]byte // computed on first v1 entry
	var content []byte
	for _, e := range entries {
		version, sigText, ok := strings.Cut(e, ",")
		if !ok {
			continue
		}
		sig, err := base64.StdEncoding.Strict().DecodeString(sigText)
		if err != nil {
			continue
		}
		switch version {
		case "v1":
			if len(sig) != sha256.Size {
				continue
			}
			if macs == nil {
				macs = make([][]byte, len(v.secrets))
				for i, k := range v.secrets {
					macs[i] = swHMAC(k.m().secret, id, ts, body)
				}
			}
			for i, mac := range macs {
				if hmac.Equal(mac, sig) {
					return v.secrets[i], true
				}
			}
		case "v1a":
			if len(sig) != ed25519.SignatureSize {
				continue
			}
			if content == nil {
				content = swContent(id, ts, body)
			}
			for _, k := range v.publics {
				if ed25519.Verify(k.m().public, content, sig) {
					return k, true
				}
			}
		}
	}
	return StandardWebhooksKey{}, false
}

func (v *standardWebhooksVerifier) principal(k StandardWebhooksKey, id string) Principal {
	return Principal{Sender: v.cfg.Sender, KeyID: k.ID(), Scheme: SchemeStandardWebhooks, MessageID: id}
}

// swBrandOf returns the brand of headers h uses: webhook-* unless only
// svix-* headers are present. A request with headers of both brands is
// malformed unless every header has exactly the field lines of its twin:
// two different ids, timestamps or signatures in one request would let two
// readers of it disagree about what was signed.
func swBrandOf(h http.Header) (swBrand, error) {
	var webhook, svix bool
	for _, name := range []string{headerWebhookID, headerWebhookTimestamp, headerWebhookSignature} {
		webhook = webhook || len(h.Values(name)) > 0
	}
	for _, name := range []string{headerSvixID, headerSvixTimestamp, headerSvixSignature} {
		svix = svix || len(h.Values(name)) > 0
	}
	if !webhook && svix {
		return svixBrand, nil
	}
	if webhook && svix {
		pairs := [][2]string{
			{headerWebhookID, headerSvixID},
			{headerWebhookTimestamp, headerSvixTimestamp},
			{headerWebhookSignature, headerSvixSignature},
		}
		for _, p := range pairs {
			if !slices.Equal(h.Values(p[0]), h.Values(p[1])) {
				return swBrand{}, reject(courier.CodeSignatureMalformed, "webhook-* and svix-* headers disagree")
			}
		}
	}
	return webhookBrand, nil
}

func swContent(id, ts string, body []byte) []byte {
	b := make([]byte, 0, len(id)+len(ts)+2+len(body))
	b = append(b, id...)
	b = append(b, '.')
	b = append(b, ts...)
	b = append(b, '.')
	return append(b, body...)
}

func swHMAC(secret []byte, id, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// validWebhookID reports whether id is a non-empty, bounded run of printable
// ASCII without spaces, safe as a header value.
func validWebhookID(id string) bool {
	if id == "" || len(id) > maxWebhookIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return false
		}
	}
	return true
}

// parseUnixSeconds parses a non-negative decimal integer of at most 18 digits
// (no sign, no spaces).
func parseUnixSeconds(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// withinTolerance reports whether unix seconds ts is at most tol from now.
func withinTolerance(now time.Time, ts int64, tol time.Duration) bool {
	diff := now.Unix() - ts
	limit := int64(tol / time.Second)
	return diff <= limit && diff >= -limit
}
