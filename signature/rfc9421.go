package signature

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/courier-go/courier"
)

// Header names of RFC 9421 and RFC 9530.
const (
	headerSignature      = "Signature"
	headerSignatureInput = "Signature-Input"
	headerContentDigest  = "Content-Digest"
)

// The AdCP RFC 9421 webhook profile.
const (
	// adCPWebhookTag is the tag signature parameter of AdCP webhooks.
	adCPWebhookTag = "adcp/webhook-signing/v1"
	// rFC9421Label is the signature label the signer writes and the
	// verifier reads; other labels are ignored.
	rFC9421Label = "sig1"
	// maxRFC9421Window is the longest expires − created AdCP allows, and
	// the signer's default.
	maxRFC9421Window = 300 * time.Second
	// defaultRFC9421ClockSkew is how far the verifier's clock may be from the
	// signer's: created may be this far in the future, expires this far in
	// the past.
	defaultRFC9421ClockSkew = 60 * time.Second
)

// rfc9421Components are the covered components of the profile, in the order
// the signer writes them.
var rfc9421Components = []string{"@method", "@target-uri", "@authority", "content-type", "content-digest"}

// rfc9421NonceBytes is the size of a signer's random nonce.
const rfc9421NonceBytes = 16

// maxNonceBytes bounds the nonce a verifier accepts.
const maxNonceBytes = 256

// RFC9421SignerConfig configures NewRFC9421Signer.
type RFC9421SignerConfig struct {
	// Key signs: a private Ed25519 or P-256 JWK. Its kid is the keyid
	// parameter and its algorithm the alg parameter. Required.
	Key JWK
	// Window is expires − created: 1 to 300 seconds, the most AdCP
	// allows, counted in whole seconds (a fraction is dropped). Defaults
	// to 300 seconds.
	Window time.Duration
}

// withDefaults returns a copy of c with its zero fields set to their defaults.
func (c RFC9421SignerConfig) withDefaults() RFC9421SignerConfig {
	if c.Window == 0 {
		c.Window = maxRFC9421Window
	}
	return c
}

// rfc9421Signer is what NewRFC9421Signer returns.
type rfc9421Signer struct {
	key    JWK
	window int64 // seconds
}

// NewRFC9421Signer validates cfg and returns a Signer that signs requests
// with the AdCP RFC 9421 webhook profile: it sets Content-Digest (sha-256 of
// the body), Signature-Input and Signature (label "sig1", unpadded
// base64url), covering @method, @target-uri, @authority, content-type and
// content-digest, with a fresh random nonce per Sign. The signer is safe for
// concurrent use.
func NewRFC9421Signer(cfg RFC9421SignerConfig) (Signer, error) {
	cfg = cfg.withDefaults()
	if !cfg.Key.isPrivate() {
		return nil, configError("RFC9421SignerConfig.Key is not a private JWK")
	}
	if cfg.Window < time.Second || cfg.Window > maxRFC9421Window {
		return nil, configError("RFC9421SignerConfig.Window is outside 1s to " + maxRFC9421Window.String())
	}
	return &rfc9421Signer{key: cfg.Key, window: int64(cfg.Window / time.Second)}, nil
}

// Sign sets Content-Digest, Signature-Input and Signature on req. req must
// carry one Content-Type line and an absolute https URL (http only to a
// loopback host). When the URL's host is an internationalized name, Sign
// sets req.Host to its canonical A-label form, the Host the receiver must
// see for the signature to verify.
func (s *rfc9421Signer) Sign(req *http.Request, m Message) error {
	if req.URL == nil || req.Header == nil {
		return permanentSigningError("rfc9421: request has no URL or header")
	}
	if m.Time.Unix() < 0 {
		return permanentSigningError("rfc9421: message time is before 1970")
	}
	if ct := req.Header.Values("Content-Type"); len(ct) != 1 || strings.TrimSpace(ct[0]) == "" {
		return permanentSigningError("rfc9421: request needs exactly one Content-Type line")
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	target, authority, err := canonicalTarget(req.URL.Scheme+"://"+host+req.URL.RequestURI(), false)
	if err != nil || !secureTarget(target, authority) {
		return permanentSigningError("rfc9421: request URL cannot be canonicalized or is not https")
	}
	if !isASCII(host) {
		req.Host = authority
	}

	created := m.Time
	nonce := make([]byte, rfc9421NonceBytes)
	rand.Read(nonce) // never fails since Go 1.24
	km := s.key.m()
	params := []sfParam{
		{key: "created", val: sfItem{kind: sfInteger, num: created.Unix()}},
		{key: "expires", val: sfItem{kind: sfInteger, num: created.Unix() + s.window}},
		{key: "nonce", val: sfItem{kind: sfString, str: base64.RawURLEncoding.EncodeToString(nonce)}},
		{key: "keyid", val: sfItem{kind: sfString, str: km.kid}},
		{key: "alg", val: sfItem{kind: sfString, str: km.alg}},
		{key: "tag", val: sfItem{kind: sfString, str: adCPWebhookTag}},
	}
	items := make([]sfItem, len(rfc9421Components))
	for i, c := range rfc9421Components {
		items[i] = sfItem{kind: sfString, str: c}
	}
	var sp strings.Builder
	serializeInnerList(&sp, items, params)

	digest := sha256.Sum256(m.Body)
	req.Header.Set(headerContentDigest, "sha-256=:"+base64.StdEncoding.EncodeToString(digest[:])+":")
	base, err := signatureBase(rfc9421Components, sp.String(), baseRequest{
		method: req.Method, target: target, authority: authority, header: req.Header,
	})
	if err != nil {
		req.Header.Del(headerContentDigest)
		return permanentSigningError("rfc9421: cannot build the signature base")
	}
	sig, err := km.sign([]byte(base))
	if err != nil {
		req.Header.Del(headerContentDigest)
		return transientSigningError("rfc9421: signing failed")
	}
	req.Header.Set(headerSignatureInput, rFC9421Label+"="+sp.String())
	req.Header.Set(headerSignature, rFC9421Label+"=:"+base64.RawURLEncoding.EncodeToString(sig)+":")
	return nil
}

func (m *jwkMaterial) sign(base []byte) ([]byte, error) {
	if m.edPrivate != nil {
		return ed25519.Sign(m.edPrivate, base), nil
	}
	if m.ecPrivate == nil {
		return nil, errors.New("no private key")
	}
	h := sha256.Sum256(base)
	r, s, err := ecdsa.Sign(rand.Reader, m.ecPrivate, h[:])
	if err != nil {
		return nil, err
	}
	sig := make([]byte, 64) // IEEE P1363 r || s, RFC 9421 §3.3.4
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return sig, nil
}

func (m *jwkMaterial) verify(base, sig []byte) bool {
	if len(sig) != 64 {
		return false
	}
	if m.alg == AlgEd25519 {
		return ed25519.Verify(m.edPublic, base, sig)
	}
	h := sha256.Sum256(base)
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	return ecdsa.Verify(m.ecPublic, h[:], r, s)
}

// RFC9421VerifierConfig configures NewRFC9421Verifier.
type RFC9421VerifierConfig struct {
	// Sender names who signs with these keys; it is Principal.Sender, the
	// name receivers record its requests under: 1-256 bytes of UTF-8
	// without control characters (NUL, newline, tab, DEL or any other).
	// A Sender that is not such text is a configuration error. Required.
	Sender string
	// Keys are the sender's published keys (its JWK Set), found by kid:
	// public keys (JWK.Public); a private key is a configuration error.
	// Required unless LookupKey is set.
	Keys []JWK
	// LookupKey finds a key by kid, for a JWK Set that changes while the
	// verifier runs. found=false rejects with courier.CodeWebhookKeyUnknown;
	// an error is infrastructure trouble and is returned as is. Set Keys or
	// LookupKey, not both.
	LookupKey func(ctx context.Context, keyID string) (key JWK, found bool, err error)
	// Revoked reports whether a key is revoked. When its revocation data
	// is older than its refresh deadline plus grace, so it cannot vouch
	// for any key, it returns an error matching
	// courier.CodeWebhookRevocationStale (the code itself, or wrapping
	// it), and the request is rejected with that code: a refusal for now,
	// not a bad signature, which middleware.Verify and package handler's
	// receivers answer 503, so the sender retries on its own schedule
	// until the data is refreshed. Any other error is infrastructure
	// trouble and is returned as is. Defaults to no key being revoked.
	Revoked func(ctx context.Context, keyID string) (revoked bool, err error)
	// Replay remembers (keyid, nonce) pairs, each keyid qualified by
	// Sender (see ReplayCache), so the verifiers of several senders may
	// share one cache even when their key ids coincide. A key at the
	// cache's cap of live nonces is rejected with
	// courier.CodeWebhookRateAbuse, which middleware.Verify and package
	// handler's receivers answer 429 with Retry-After: the sender retries
	// once nonces expire. Defaults to a
	// cache in this process's memory holding up to 1,000,000 live nonces
	// per key (AdCP's minimum), one for the whole process: a verifier
	// built again, with a new key beside the old (see the package doc,
	// Rotating keys), remembers the nonces its predecessor saw, so a
	// request that one accepted is not accepted again. (A verifier with a
	// Now of its own, a test's clock, has a cache of its own, which
	// expires nonces by that clock.) It only protects one process, so a
	// receiver with several processes passes the store's shared cache
	// (store.Store.Replay).
	Replay ReplayCache
	// Origin is the scheme and authority senders address this receiver by:
	// "https://buyer.example.com", or "https://buyer.example.com:8443" (http
	// only to a loopback host, for local development and tests). The
	// verifier rebuilds @target-uri and @authority from Origin and the
	// request's path and query, never from the Host the request carries, so
	// a request signed for another receiver does not verify here even when
	// both receivers trust the same sender key. Behind a proxy that
	// terminates TLS or rewrites Host it is still the origin the sender
	// used, the proxy's public one; X-Forwarded-Host, X-Forwarded-Proto and
	// Forwarded are never read. The path and query are the request's
	// RequestURI, which http.StripPrefix and ServeMux patterns leave whole:
	// a proxy must forward them unchanged (see the package doc, Behind a
	// proxy). Only scheme, host and port: no path (not even "/"), query,
	// fragment or userinfo. Required unless TrustRequestHost is set; there
	// is no default, since only the receiver knows its name.
	Origin string
	// TrustRequestHost derives the origin from each request instead of
	// Origin: the request URL's scheme if absolute, else https when it came
	// over TLS (http otherwise), and its Host. The risk: Host is whatever
	// the client sent, so a request signed for another receiver that trusts
	// the same sender key verifies here when it is sent with that
	// receiver's Host. Set it only behind a proxy that sets Host itself from
	// its own configuration, or in tests. A proxy that terminates TLS and
	// forwards plain http makes the derived scheme http, which no https
	// signature matches (401 webhook_target_uri_malformed): there, set
	// Origin. Forwarding headers (X-Forwarded-Proto, -Host, Forwarded) are
	// not read here either. Set Origin or TrustRequestHost, not both.
	// Defaults to false.
	TrustRequestHost bool
	// ClockSkew is how far created may be in the future and expires in the
	// past: at most 300 seconds, counted in whole seconds (a fraction is
	// dropped). Zero means the default, 60 seconds; a negative skew is a
	// configuration error.
	ClockSkew time.Duration
	// Now is the verifier's clock. Defaults to time.Now.
	Now func() time.Time
}

// withDefaults returns a copy of c with its zero fields set to their
// defaults. Replay defaults to processReplay, or to a memoryReplayCache of
// the verifier's own when it has a clock of its own.
func (c RFC9421VerifierConfig) withDefaults() RFC9421VerifierConfig {
	if c.ClockSkew == 0 {
		c.ClockSkew = defaultRFC9421ClockSkew
	}
	switch {
	case c.Replay != nil:
	case c.Now == nil:
		c.Replay = processReplay
	default:
		c.Replay = &memoryReplayCache{Now: c.Now}
	}
	c.Now = nowFunc(c.Now)
	return c
}

// processReplay is the replay cache of every RFC 9421 verifier of the
// process on the system clock that is given none. Its pairs are each
// qualified by the verifier's Sender (see ReplayCache), so verifiers of
// several senders share it as they would the store's.
var processReplay = &memoryReplayCache{}

// rfc9421Verifier is what NewRFC9421Verifier returns.
type rfc9421Verifier struct {
	cfg    RFC9421VerifierConfig
	keys   map[string]JWK
	origin string // canonical "scheme://authority", or "" with TrustRequestHost
}

// NewRFC9421Verifier validates cfg and returns a Verifier that verifies the
// AdCP RFC 9421 webhook profile, following AdCP's webhook verifier
// checklist: the signature headers and parameters, the tag, the algorithm,
// the validity window, the covered components, the target URI, the key (by
// kid, its purpose, its revocation), the signature, the Content-Digest
// against the body, and finally the (keyid, nonce) replay check, so that
// only fully valid requests consume replay-cache entries, and the window
// once more: a request whose window ended while it was verified is
// refused with webhook_signature_window_invalid. Failures carry
// AdCP's webhook_signature_* codes. The target URI is this receiver's
// configured Origin and the request's path and query. The signature may be
// unpadded base64url, as AdCP and the signer write it, or padded standard
// base64, as RFC 8941 defines byte sequences and generic HTTP Message
// Signatures libraries write them; a value that mixes the two alphabets, or
// pads base64url, is malformed. The verifier is safe for concurrent use.
func NewRFC9421Verifier(cfg RFC9421VerifierConfig) (Verifier, error) {
	cfg = cfg.withDefaults()
	if err := checkSender("RFC9421VerifierConfig", cfg.Sender); err != nil {
		return nil, err
	}
	if (len(cfg.Keys) == 0) == (cfg.LookupKey == nil) {
		return nil, configError("RFC9421VerifierConfig.Keys or LookupKey must be set, not both")
	}
	if cfg.ClockSkew < 0 || cfg.ClockSkew > maxRFC9421Window {
		return nil, configError("RFC9421VerifierConfig.ClockSkew is outside 0 to " + maxRFC9421Window.String())
	}
	v := &rfc9421Verifier{cfg: cfg}
	if len(cfg.Keys) > 0 {
		v.keys = make(map[string]JWK, len(cfg.Keys))
		for i, k := range cfg.Keys {
			if k.m == nil {
				return nil, configError(fmt.Sprintf("RFC9421VerifierConfig.Keys[%d] is not a parsed JWK", i))
			}
			if k.isPrivate() {
				// A verifier needs none, and a signing key's key_ops
				// (GenerateJWK's ["sign"]) would refuse every request.
				return nil, configError(fmt.Sprintf("RFC9421VerifierConfig.Keys[%d] (key id %q) is a private key; give the verifier its Public half", i, printableID(k.KeyID())))
			}
			if _, dup := v.keys[k.KeyID()]; dup {
				return nil, configError(fmt.Sprintf("RFC9421VerifierConfig.Keys[%d]: key id %q appears twice", i, printableID(k.KeyID())))
			}
			v.keys[k.KeyID()] = k
		}
		v.cfg.Keys = nil // held above
	}
	switch {
	case cfg.Origin != "" && cfg.TrustRequestHost:
		return nil, configError("RFC9421VerifierConfig.Origin and TrustRequestHost are both set; set one")
	case cfg.Origin == "" && !cfg.TrustRequestHost:
		return nil, configError("RFC9421VerifierConfig.Origin is empty; set the receiver's origin (TrustRequestHost instead only behind a proxy that sets Host)")
	case cfg.Origin != "":
		origin, err := canonicalOrigin(cfg.Origin)
		if err != nil {
			return nil, err
		}
		v.origin = origin
	}
	return v, nil
}

// canonicalOrigin validates a configured origin, "scheme://host[:port]",
// and returns its canonical form: lower case, A-label host, no default
// port.
func canonicalOrigin(raw string) (string, error) {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", configError(`RFC9421VerifierConfig.Origin is not "scheme://host[:port]"`)
	}
	if strings.ContainsAny(rest, "/?#@") {
		return "", configError(`RFC9421VerifierConfig.Origin has a path, query, fragment or userinfo; want only "scheme://host[:port]"`)
	}
	target, authority, err := canonicalTarget(raw, false)
	if err != nil {
		return "", configError(`RFC9421VerifierConfig.Origin is not "http(s)://host[:port]" with a valid host and port`)
	}
	if !secureTarget(target, authority) {
		return "", configError("RFC9421VerifierConfig.Origin is not https (http only to a loopback host)")
	}
	return strings.TrimSuffix(target, "/"), nil
}

// rfc9421Input is a parsed sig1 member of Signature-Input with its Signature.
type rfc9421Input struct {
	components []string
	sigParams  string // serialized, as it appears in the base
	created    int64
	expires    int64
	nonce      string
	keyID      string
	alg        string
	tag        string
	signature  []byte
}

// Verify checks req's Signature-Input, Signature and Content-Digest against
// body.
func (v *rfc9421Verifier) Verify(ctx context.Context, req *http.Request, body []byte) (Principal, error) {
	// Steps 1 and 2: the headers and the parameters.
	in, err := parseRFC9421Headers(req.Header)
	if err != nil {
		return Principal{}, err
	}
	// Step 3: the tag.
	if in.tag != adCPWebhookTag {
		return Principal{}, reject(courier.CodeWebhookTagInvalid, "tag is not "+adCPWebhookTag)
	}
	// Step 4: the algorithm.
	if in.alg != AlgEd25519 && in.alg != AlgECDSAP256SHA256 {
		return Principal{}, reject(courier.CodeWebhookAlgNotAllowed, "alg is not ed25519 or ecdsa-p256-sha256")
	}
	// Step 5: the window.
	now := v.cfg.Now().Unix()
	skew := int64(v.cfg.ClockSkew / time.Second)
	switch {
	case in.expires <= in.created:
		return Principal{}, reject(courier.CodeWebhookWindowInvalid, "expires is not after created")
	case in.expires-in.created > int64(maxRFC9421Window/time.Second):
		return Principal{}, reject(courier.CodeWebhookWindowInvalid, "window is longer than 300 seconds")
	case now < in.created-skew:
		return Principal{}, reject(courier.CodeWebhookWindowInvalid, "created is in the future")
	case now > in.expires+skew:
		return Principal{}, reject(courier.CodeWebhookWindowInvalid, "signature has expired")
	}
	// Step 6: the covered components.
	for _, c := range rfc9421Components {
		if !slices.Contains(in.components, c) {
			return Principal{}, reject(courier.CodeWebhookComponentsIncomplete, "covered components lack "+c)
		}
	}
	// The target URI, as this receiver was addressed.
	target, authority, err := v.receivedTarget(req)
	if err != nil {
		return Principal{}, err
	}
	// Steps 7 to 9: the key, its purpose, its revocation.
	key, err := v.key(ctx, in.keyID)
	if err != nil {
		return Principal{}, err
	}
	km := key.m()
	if !km.purposeOK() {
		return Principal{}, reject(courier.CodeWebhookKeyPurposeInvalid, "key's adcp_use or key_ops does not allow verifying webhooks")
	}
	if km.alg != in.alg {
		return Principal{}, reject(courier.CodeWebhookAlgNotAllowed, "alg does not match the key")
	}
	if v.cfg.Revoked != nil {
		revoked, err := v.cfg.Revoked(ctx, in.keyID)
		switch {
		case errors.Is(err, courier.CodeWebhookRevocationStale):
			return Principal{}, reject(courier.CodeWebhookRevocationStale, "revocation data is stale")
		case err != nil:
			return Principal{}, fmt.Errorf("signature: rfc9421: revocation check: %w", err)
		case revoked:
			return Principal{}, reject(courier.CodeWebhookKeyRevoked, "key is revoked")
		}
	}
	// Step 10: the signature.
	base, err := signatureBase(in.components, in.sigParams, baseRequest{
		method: req.Method, target: target, authority: authority, header: req.Header,
	})
	switch {
	case errors.Is(err, errComponentAbsent) && req.Header.Get(headerContentDigest) == "":
		return Principal{}, reject(courier.CodeWebhookDigestMismatch, "Content-Digest is missing")
	case err != nil:
		return Principal{}, reject(courier.CodeWebhookHeaderMalformed, "a covered component is absent, repeated or unsupported")
	}
	if !km.verify([]byte(base), in.signature) {
		return Principal{}, reject(courier.CodeWebhookInvalid, "signature does not verify")
	}
	// Step 11: the body.
	if !contentDigestMatches(req.Header.Get(headerContentDigest), body) {
		return Principal{}, reject(courier.CodeWebhookDigestMismatch, "Content-Digest does not match the body")
	}
	// Steps 12 and 13: replay, committed only for a fully valid request.
	// The nonce is held for as long as step 5 accepts the request: until
	// the second after expires+skew begins, since it compares whole
	// seconds.
	until := time.Unix(in.expires+skew+1, 0)
	// The pair is recorded under the keyid qualified by Sender: key ids
	// are each sender's own, and senders may share a cache.
	replayed, err := v.cfg.Replay.Remember(ctx, replayKeyID(v.cfg.Sender, in.keyID), in.nonce, until)
	switch {
	case errors.Is(err, courier.CodeWebhookRateAbuse):
		return Principal{}, reject(courier.CodeWebhookRateAbuse, "key reached its cap of live nonces")
	case err != nil:
		return Principal{}, fmt.Errorf("signature: rfc9421: replay cache: %w", err)
	case replayed:
		return Principal{}, reject(courier.CodeWebhookReplayed, "nonce was already used with this key")
	}
	// The window once more, now that the pair is recorded: the steps
	// between may take long (LookupKey, Revoked), and the cache judges
	// expiry by a clock read after them. Two deliveries of one request
	// that passed step 5 inside the window but reach the cache after it
	// has ended each find the other's pair expired; refused here, neither
	// is accepted.
	if v.cfg.Now().Unix() > in.expires+skew {
		return Principal{}, reject(courier.CodeWebhookWindowInvalid, "signature expired while it was verified")
	}
	return Principal{Sender: v.cfg.Sender, KeyID: in.keyID, Scheme: SchemeRFC9421}, nil
}

func (v *rfc9421Verifier) key(ctx context.Context, kid string) (JWK, error) {
	if v.keys != nil {
		if k, ok := v.keys[kid]; ok {
			return k, nil
		}
		return JWK{}, reject(courier.CodeWebhookKeyUnknown, "keyid names no key of the sender")
	}
	k, found, err := v.cfg.LookupKey(ctx, kid)
	switch {
	case err != nil:
		return JWK{}, fmt.Errorf("signature: rfc9421: key lookup: %w", err)
	case !found || k.m == nil || k.KeyID() != kid:
		return JWK{}, reject(courier.CodeWebhookKeyUnknown, "keyid names no key of the sender")
	}
	return k, nil
}

// receivedTarget reconstructs and canonicalizes the target URI of a
// received request: the configured origin with the request's path and
// query, or with TrustRequestHost the origin the request itself names.
func (v *rfc9421Verifier) receivedTarget(req *http.Request) (target, authority string, err error) {
	malformed := reject(courier.CodeWebhookTargetURIMalformed, "target URI cannot be canonicalized, is not https, or Host disagrees with it")
	if req.URL == nil {
		return "", "", malformed
	}
	requestURI := req.RequestURI
	if !strings.HasPrefix(requestURI, "/") {
		requestURI = req.URL.RequestURI() // absolute-form, or a request built in process
	}
	origin := v.origin
	if origin == "" {
		scheme := strings.ToLower(req.URL.Scheme)
		if scheme == "" {
			scheme = "http"
			if req.TLS != nil {
				scheme = "https"
			}
		}
		host := req.Host
		if host == "" {
			host = req.URL.Host
		}
		if req.URL.Host != "" && req.Host != "" {
			_, a1, err1 := canonicalTarget(scheme+"://"+req.Host+"/", true)
			_, a2, err2 := canonicalTarget(scheme+"://"+req.URL.Host+"/", true)
			if err1 != nil || err2 != nil || a1 != a2 {
				return "", "", malformed
			}
		}
		origin = scheme + "://" + host
	}
	target, authority, err = canonicalTarget(origin+requestURI, true)
	if err != nil || !secureTarget(target, authority) {
		return "", "", malformed
	}
	return target, authority, nil
}

// secureTarget reports whether a canonical target is https, or http to a
// loopback host (local development and tests).
func secureTarget(target, authority string) bool {
	if strings.HasPrefix(target, "https://") {
		return true
	}
	host := authority
	if h, _, err := net.SplitHostPort(authority); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseRFC9421Headers parses the sig1 members of Signature-Input and
// Signature (checklist steps 1 and 2).
func parseRFC9421Headers(h http.Header) (rfc9421Input, error) {
	malformed := func(msg string) (rfc9421Input, error) {
		return rfc9421Input{}, reject(courier.CodeWebhookHeaderMalformed, msg)
	}
	inputText := strings.Join(h.Values(headerSignatureInput), ", ")
	sigText := strings.Join(h.Values(headerSignature), ", ")
	if strings.TrimSpace(inputText) == "" || strings.TrimSpace(sigText) == "" {
		return malformed("Signature and Signature-Input must both be present")
	}
	if len(inputText) > maxHeaderBytes || len(sigText) > maxHeaderBytes {
		return malformed("Signature or Signature-Input is too long")
	}
	inputs, err := parseSFDictionary(inputText)
	if err != nil {
		return malformed("Signature-Input is not a structured-field dictionary")
	}
	sigs, err := parseSFDictionary(sigText)
	if err != nil {
		return malformed("Signature is not a structured-field dictionary")
	}
	input, ok := sfLookup(inputs, rFC9421Label)
	if !ok || !input.isList {
		return malformed("Signature-Input has no sig1 inner list")
	}
	sig, ok := sfLookup(sigs, rFC9421Label)
	if !ok || sig.isList || sig.item.kind != sfBytes {
		return malformed("Signature has no sig1 byte sequence")
	}
	var in rfc9421Input
	if in.signature, err = decodeSFBinary(sig.item.str); err != nil || len(in.signature) == 0 {
		return malformed("signature is not base64 in one consistent form")
	}
	for _, it := range input.list {
		if it.kind != sfString || len(it.params) > 0 || slices.Contains(in.components, it.str) {
			return malformed("a covered component is not a plain string, or repeats")
		}
		in.components = append(in.components, it.str)
	}
	var sp strings.Builder
	serializeInnerList(&sp, input.list, input.params)
	in.sigParams = sp.String()

	var have [6]bool
	for _, p := range input.params {
		switch p.key {
		case "created", "expires":
			if p.val.kind != sfInteger || p.val.num < 0 {
				return malformed(p.key + " is not a non-negative integer")
			}
			if p.key == "created" {
				in.created, have[0] = p.val.num, true
			} else {
				in.expires, have[1] = p.val.num, true
			}
		case "nonce", "keyid", "alg", "tag":
			if p.val.kind != sfString || p.val.str == "" {
				return malformed(p.key + " is not a non-empty string")
			}
			switch p.key {
			case "nonce":
				in.nonce, have[2] = p.val.str, true
			case "keyid":
				in.keyID, have[3] = p.val.str, true
			case "alg":
				in.alg, have[4] = p.val.str, true
			case "tag":
				in.tag, have[5] = p.val.str, true
			}
		}
	}
	for _, ok := range have {
		if !ok {
			return rfc9421Input{}, reject(courier.CodeWebhookParamsIncomplete, "created, expires, nonce, keyid, alg and tag are all required")
		}
	}
	if len(in.nonce) > maxNonceBytes || len(in.keyID) > maxKeyIDBytes {
		return malformed("nonce or keyid is too long")
	}
	return in, nil
}

// contentDigestMatches reports whether the Content-Digest field carries the
// SHA-256 of body, in either form decodeSFBinary reads.
func contentDigestMatches(field string, body []byte) bool {
	if field == "" || len(field) > maxHeaderBytes {
		return false
	}
	members, err := parseSFDictionary(field)
	if err != nil {
		return false
	}
	m, ok := sfLookup(members, "sha-256")
	if !ok || m.isList || m.item.kind != sfBytes {
		return false
	}
	got, err := decodeSFBinary(m.item.str)
	if err != nil {
		return false
	}
	want := sha256.Sum256(body)
	return subtle.ConstantTimeCompare(got, want[:]) == 1
}

func sfLookup(members []sfMember, key string) (sfMember, bool) {
	for _, m := range members {
		if m.key == key {
			return m, true
		}
	}
	return sfMember{}, false
}
