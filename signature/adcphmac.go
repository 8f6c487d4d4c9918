package signature

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/strictjson"
)

// AdCP legacy HMAC header names.
const (
	headerAdCPSignature = "X-ADCP-Signature"
	headerAdCPTimestamp = "X-ADCP-Timestamp"
)

// defaultAdCPHMACTolerance is how far X-ADCP-Timestamp may be from the
// verifier's clock, either way, as AdCP sets it.
const defaultAdCPHMACTolerance = 300 * time.Second

// adcpHMACPrefix starts X-ADCP-Signature; lower-case hex of the MAC follows.
const adcpHMACPrefix = "sha256="

// adcpHMACSigner is what NewAdCPHMACSigner returns.
type adcpHMACSigner struct {
	secret Secret
}

// NewAdCPHMACSigner returns a Signer that signs requests with AdCP's
// legacy (deprecated) HMAC-SHA256 scheme, keyed with the ASCII bytes of
// the shared secret: X-ADCP-Timestamp is the attempt time in unix seconds
// and X-ADCP-Signature is "sha256=" and the lower-case hex HMAC-SHA256 of
// timestamp + "." + body. The signer is safe for concurrent use.
func NewAdCPHMACSigner(secret Secret) (Signer, error) {
	if secret.m == nil {
		return nil, configError("NewAdCPHMACSigner: the secret is not a parsed secret")
	}
	return &adcpHMACSigner{secret: secret}, nil
}

// Sign sets X-ADCP-Timestamp (m.Time) and X-ADCP-Signature on req. As AdCP
// requires, it refuses a JSON body with a duplicate object key at any depth
// ([courier.CodeDuplicateKeyInput]) instead of signing bytes whose meaning
// depends on the parser, also where the strict reading courier's receivers
// use stops before the duplicate (a lone surrogate, invalid UTF-8 or
// nesting too deep ahead of it) and a lenient parser reads on to it.
func (s *adcpHMACSigner) Sign(req *http.Request, m Message) error {
	ts := m.Time.Unix()
	if ts < 0 {
		return permanentSigningError("adcp hmac: message time is before 1970")
	}
	if mayHaveDuplicateJSONKey(m.Body) {
		// The stored payload never changes: a case of a signing failure
		// for good, under AdCP's own code.
		return &coded.Error{Code: courier.CodeDuplicateKeyInput, Msg: "adcp hmac: body has a duplicate JSON object key, or cannot be read strictly",
			Err: permanentSigningError("")}
	}
	tsText := strconv.FormatInt(ts, 10)
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	req.Header.Set(headerAdCPTimestamp, tsText)
	req.Header.Set(headerAdCPSignature, adcpHMACPrefix+hex.EncodeToString(adcpHMAC(s.secret.m().value, tsText, m.Body)))
	return nil
}

// AdCPHMACVerifierConfig configures NewAdCPHMACVerifier.
type AdCPHMACVerifierConfig struct {
	// Sender names who holds these secrets; it is Principal.Sender, the
	// name receivers record its requests under: 1-256 bytes of UTF-8
	// without control characters (NUL, newline, tab, DEL or any other).
	// A Sender that is not such text is a configuration error. Required.
	Sender string
	// Secrets are the accepted secrets; during a rotation hold the old and
	// the new one, under ids of their own (ParseSecret): one id over two
	// secrets is a configuration error, since Principal.KeyID names the one that
	// verified. Required.
	Secrets []Secret
	// Tolerance is how far X-ADCP-Timestamp may be from Now, either way:
	// from one second to one hour, counted in whole seconds (a fraction is
	// dropped); a negative one, one under a second or one over an hour is a
	// configuration error. Defaults to 300 seconds (when zero). A request
	// replayed within it is refused as a duplicate by the receiver's inbox
	// record alone, which must then outlive twice the tolerance:
	// store.Inbox.Prune keeps records at least 24 hours, hence the hour.
	Tolerance time.Duration
	// Now is the verifier's clock. Defaults to time.Now.
	Now func() time.Time
}

// withDefaults returns a copy of c with its zero fields set to their defaults.
func (c AdCPHMACVerifierConfig) withDefaults() AdCPHMACVerifierConfig {
	if c.Tolerance == 0 {
		c.Tolerance = defaultAdCPHMACTolerance
	}
	c.Now = nowFunc(c.Now)
	return c
}

// adcpHMACVerifier is what NewAdCPHMACVerifier returns.
type adcpHMACVerifier struct {
	sender    string
	secrets   []Secret
	tolerance time.Duration
	now       func() time.Time
}

// NewAdCPHMACVerifier validates cfg and returns a Verifier that verifies
// AdCP legacy HMAC signatures. It compares MACs in constant time and never
// parses the body: a body with duplicate JSON keys passes here and is
// refused by the JSON decoding that follows. The verifier is safe for
// concurrent use.
func NewAdCPHMACVerifier(cfg AdCPHMACVerifierConfig) (Verifier, error) {
	cfg = cfg.withDefaults()
	if err := checkSecrets("AdCPHMACVerifierConfig", cfg.Sender, "Secrets", cfg.Secrets); err != nil {
		return nil, err
	}
	if err := checkTolerance("AdCPHMACVerifierConfig", cfg.Tolerance); err != nil {
		return nil, err
	}
	return &adcpHMACVerifier{
		sender:    cfg.Sender,
		secrets:   append([]Secret(nil), cfg.Secrets...),
		tolerance: cfg.Tolerance,
		now:       cfg.Now,
	}, nil
}

// Verify checks req's X-ADCP-Timestamp and X-ADCP-Signature against body.
func (v *adcpHMACVerifier) Verify(_ context.Context, req *http.Request, body []byte) (Principal, error) {
	sigText, err := oneHeader(req.Header, headerAdCPSignature)
	if err != nil {
		return Principal{}, err
	}
	tsText, err := oneHeader(req.Header, headerAdCPTimestamp)
	if err != nil {
		return Principal{}, err
	}
	ts, ok := parseUnixSeconds(tsText)
	if !ok {
		return Principal{}, reject(courier.CodeSignatureMalformed, "X-ADCP-Timestamp is not unix seconds")
	}
	if !withinTolerance(v.now(), ts, v.tolerance) {
		return Principal{}, reject(courier.CodeSignatureTimestamp, "X-ADCP-Timestamp is outside the tolerance")
	}
	sig, ok := parseAdCPSignature(sigText)
	if !ok {
		return Principal{}, reject(courier.CodeSignatureMalformed, `X-ADCP-Signature is not "sha256=" and 64 hex digits`)
	}
	match := -1
	for i, s := range v.secrets {
		if hmac.Equal(adcpHMAC(s.m().value, tsText, body), sig) && match < 0 {
			match = i
		}
	}
	if match < 0 {
		return Principal{}, reject(courier.CodeSignatureMismatch, "signature matches no configured secret")
	}
	return Principal{Sender: v.sender, KeyID: v.secrets[match].ID(), Scheme: SchemeAdCPHMAC}, nil
}

// parseAdCPSignature parses "sha256=" and 64 hex digits (either case) into
// the 32-byte MAC.
func parseAdCPSignature(s string) ([]byte, bool) {
	if len(s) != len(adcpHMACPrefix)+2*sha256.Size || s[:len(adcpHMACPrefix)] != adcpHMACPrefix {
		return nil, false
	}
	sig, err := hex.DecodeString(s[len(adcpHMACPrefix):])
	if err != nil {
		return nil, false
	}
	return sig, true
}

func adcpHMAC(secret []byte, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// mayHaveDuplicateJSONKey reports whether body has an object with the
// same key twice, read as courier's receivers read JSON (strictjson) or,
// where that reading stops first, as a lenient parser reads it
// (encoding/json, which takes a lone surrogate or invalid UTF-8 for
// U+FFFD and nests deeper). A body neither reads as JSON has none: it is
// signed as is.
func mayHaveDuplicateJSONKey(body []byte) bool {
	err := strictjson.Check(body)
	switch {
	case err == nil:
		return false
	case errors.Is(err, strictjson.ErrDuplicateKey):
		return true
	}
	return lenientDuplicateKey(body)
}

// lenientDuplicateKey reports whether encoding/json, reading body token by
// token, meets an object key twice in one object before body ends or stops
// being JSON.
func lenientDuplicateKey(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		keys      map[string]bool // nil for an array
		expectKey bool            // the next string token of an object is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false // the end, or no longer JSON: nothing more to find
		}
		top := len(stack) - 1
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				if top >= 0 && stack[top].keys != nil {
					stack[top].expectKey = true // the object is the value: a key comes next
				}
				stack = append(stack, frame{keys: map[string]bool{}, expectKey: true})
			case '[':
				if top >= 0 && stack[top].keys != nil {
					stack[top].expectKey = true
				}
				stack = append(stack, frame{})
			default: // '}' or ']'
				stack = stack[:top]
			}
			continue
		case string:
			if top >= 0 && stack[top].keys != nil && stack[top].expectKey {
				if stack[top].keys[t] {
					return true
				}
				stack[top].keys[t] = true
				stack[top].expectKey = false
				continue
			}
		}
		if top >= 0 && stack[top].keys != nil {
			stack[top].expectKey = true // a value ended: a key comes next
		}
	}
}
