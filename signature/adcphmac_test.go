package signature

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/adcpvectors"
)

const adcpHMACVectorsPath = "testdata/adcp/webhook-hmac-sha256.json"

func loadAdCPHMACVectors(t *testing.T) adcpvectors.HMACVectors {
	t.Helper()
	return adcpvectors.LoadHMAC(t, adcpHMACVectorsPath)
}

func adcpTestSecret(t *testing.T, value string) Secret {
	t.Helper()
	s, err := ParseSecret("", value)
	if err != nil {
		t.Fatalf("ParseSecret: %v", err)
	}
	return s
}

func newAdCPHMACVerifier(t *testing.T, now int64, secrets ...Secret) Verifier {
	t.Helper()
	v, err := NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Sender: "seller", Secrets: secrets, Now: clockAt(now)})
	if err != nil {
		t.Fatalf("NewAdCPHMACVerifier: %v", err)
	}
	return v
}

func TestAdCPHMACVectors(t *testing.T) {
	t.Parallel()
	vecs := loadAdCPHMACVectors(t)
	secret := adcpTestSecret(t, vecs.Secret)
	signer, err := NewAdCPHMACSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, vec := range vecs.Vectors {
		t.Run(vec.ID, func(t *testing.T) {
			t.Parallel()
			ts, err := strconv.ParseInt(vec.TimestampText(t), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(vec.RawBody)
			// The verifier never parses the body: the duplicate-key vector's
			// MAC is valid and passes here; the receiver's strict JSON
			// decoding refuses it next (courier.CodeDuplicateKey), which is
			// the reject-malformed outcome the vector requires.
			req := newRequest(t, http.MethodPost, "https://buyer.example/hook", map[string][]string{
				headerAdCPTimestamp: {strconv.FormatInt(ts, 10)},
				headerAdCPSignature: {vec.ExpectedSignature},
			}, body)
			p, err := newAdCPHMACVerifier(t, ts, secret).Verify(context.Background(), req, body)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if p.Scheme != SchemeAdCPHMAC || p.Sender != "seller" || p.KeyID != secret.ID() {
				t.Errorf("principal = %+v", p)
			}

			out := newRequest(t, http.MethodPost, "https://buyer.example/hook", nil, body)
			err = signer.Sign(out, Message{ID: "n", Body: body, Time: time.Unix(ts, 0)})
			if vec.ExpectedAction == "reject-malformed" {
				if courier.CodeOf(err) != courier.CodeDuplicateKeyInput {
					t.Fatalf("Sign = %v, want %s", err, courier.CodeDuplicateKeyInput)
				}
				return
			}
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if got := out.Header.Get(headerAdCPSignature); got != vec.ExpectedSignature {
				t.Errorf("X-ADCP-Signature = %q, want %q", got, vec.ExpectedSignature)
			}
			if got := out.Header.Get(headerAdCPTimestamp); got != strconv.FormatInt(ts, 10) {
				t.Errorf("X-ADCP-Timestamp = %q", got)
			}
		})
	}
}

func TestAdCPHMACRejectionVectors(t *testing.T) {
	t.Parallel()
	vecs := loadAdCPHMACVectors(t)
	secret := adcpTestSecret(t, vecs.Secret)
	want := adcpvectors.HMACRejectionCodes
	for _, vec := range vecs.RejectionVectors {
		t.Run(vec.ID, func(t *testing.T) {
			t.Parallel()
			code, ok := want[vec.ID]
			if !ok {
				t.Fatalf("no expected code for rejection vector %q", vec.ID)
			}
			now := int64(1700000000)
			if vec.CurrentTime != nil {
				now = *vec.CurrentTime
			}
			h := map[string][]string{headerAdCPTimestamp: {vec.TimestampText(t)}}
			if vec.Signature != nil {
				h[headerAdCPSignature] = []string{*vec.Signature}
			}
			body := []byte(vec.RawBody)
			_, err := newAdCPHMACVerifier(t, now, secret).Verify(context.Background(), newRequest(t, http.MethodPost, "https://buyer.example/hook", h, body), body)
			wantReject(t, err, code)
		})
	}
}

func TestAdCPHMACSecretRejectionVectors(t *testing.T) {
	t.Parallel()
	for _, vec := range loadAdCPHMACVectors(t).SecretRejections {
		t.Run(vec.Description, func(t *testing.T) {
			t.Parallel()
			_, err := ParseSecret("", vec.Secret)
			if err == nil {
				t.Fatal("ParseSecret accepted the secret")
			}
			if vec.Secret != "" && strings.Contains(err.Error(), vec.Secret) {
				t.Errorf("error %q contains the secret", err)
			}
		})
	}
}

func TestAdCPHMACSignerDuplicateKeys(t *testing.T) {
	t.Parallel()
	vecs := loadAdCPHMACVectors(t)
	signer, err := NewAdCPHMACSigner(adcpTestSecret(t, vecs.Secret))
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name string
		body string
		ok   bool
	}
	var tests []tc
	for _, v := range vecs.SignerSide.RejectionVectors {
		tests = append(tests, tc{v.ID, v.Body, false})
	}
	for _, v := range vecs.SignerSide.PositiveVectors {
		tests = append(tests, tc{v.ID, v.Body, true})
	}
	tests = append(tests,
		tc{"escaped duplicate", `{"a":1,"\u0061":2}`, false},
		tc{"same key in sibling objects", `{"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]}`, true},
		tc{"key equal to a string value", `{"a":"b","b":"a"}`, true},
		// JSON a lenient parser reads, duplicate and all, where the strict
		// one stops first: no duplicate can be ruled out.
		tc{"duplicate after a lone surrogate", `{"n":"\ud800","status":"approved","status":"rejected"}`, false},
		tc{"duplicate after invalid UTF-8", "{\"n\":\"\xff\",\"status\":\"approved\",\"status\":\"rejected\"}", false},
		tc{"duplicate nested too deep", strings.Repeat(`{"a":`, 120) + `{"k":1,"k":2}` + strings.Repeat("}", 120), false},
		tc{"an array with a duplicate after a lone surrogate", ` ["\udc00",{"k":1,"k":2}]`, false},
		tc{"not JSON", `not json, signed as is`, true},
		tc{"empty", ``, true},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := newRequest(t, http.MethodPost, "https://buyer.example/hook", nil, nil)
			err := signer.Sign(req, Message{ID: "n", Body: []byte(tt.body), Time: time.Unix(1700000000, 0)})
			if tt.ok {
				if err != nil {
					t.Fatalf("Sign: %v", err)
				}
				return
			}
			if courier.CodeOf(err) != courier.CodeDuplicateKeyInput {
				t.Fatalf("Sign = %v, want %s", err, courier.CodeDuplicateKeyInput)
			}
			// A Signer's failure is a case of signing_failed, and one no
			// retry changes also of config_invalid: a worker fails the
			// delivery at once rather than sign the same bytes again.
			if !errors.Is(err, courier.CodeSigningFailed) || !errors.Is(err, courier.CodeConfigInvalid) {
				t.Errorf("Sign = %v, want a case of %s and of %s", err, courier.CodeSigningFailed, courier.CodeConfigInvalid)
			}
			if len(req.Header) != 0 {
				t.Errorf("headers emitted for a refused body: %v", req.Header)
			}
		})
	}
}

func TestAdCPHMACRotationAndHeaders(t *testing.T) {
	t.Parallel()
	oldSecret := adcpTestSecret(t, "old-0123456789abcdef0123456789abcdef")
	newSecret := adcpTestSecret(t, "new-0123456789abcdef0123456789abcdef")
	const ts = 1_700_000_000
	body := []byte(`{"event":"x"}`)
	sign := func(s Secret) *http.Request {
		signer, err := NewAdCPHMACSigner(s)
		if err != nil {
			t.Fatal(err)
		}
		req := newRequest(t, http.MethodPost, "https://buyer.example/hook", nil, body)
		if err := signer.Sign(req, Message{ID: "n", Body: body, Time: time.Unix(ts, 0)}); err != nil {
			t.Fatal(err)
		}
		return req
	}
	signedNew := sign(newSecret)

	tests := []struct {
		name    string
		req     func() *http.Request
		secrets []Secret
		code    courier.Code // "" means accepted
	}{
		{"new secret, verifier holds old and new", func() *http.Request { return signedNew }, []Secret{oldSecret, newSecret}, ""},
		{"new secret, verifier holds only old", func() *http.Request { return signedNew }, []Secret{oldSecret}, courier.CodeSignatureMismatch},
		{"upper-case hex", func() *http.Request {
			r := signedNew.Clone(context.Background())
			r.Header.Set(headerAdCPSignature, "sha256="+strings.ToUpper(strings.TrimPrefix(r.Header.Get(headerAdCPSignature), "sha256=")))
			return r
		}, []Secret{newSecret}, ""},
		{"upper-case prefix", func() *http.Request {
			r := signedNew.Clone(context.Background())
			r.Header.Set(headerAdCPSignature, "SHA256="+strings.TrimPrefix(r.Header.Get(headerAdCPSignature), "sha256="))
			return r
		}, []Secret{newSecret}, courier.CodeSignatureMalformed},
		{"missing timestamp", func() *http.Request {
			r := signedNew.Clone(context.Background())
			r.Header.Del(headerAdCPTimestamp)
			return r
		}, []Secret{newSecret}, courier.CodeSignatureMissing},
		{"repeated signature", func() *http.Request {
			r := signedNew.Clone(context.Background())
			r.Header.Add(headerAdCPSignature, r.Header.Get(headerAdCPSignature))
			return r
		}, []Secret{newSecret}, courier.CodeSignatureMalformed},
		{"other timestamp", func() *http.Request {
			r := signedNew.Clone(context.Background())
			r.Header.Set(headerAdCPTimestamp, strconv.Itoa(ts+1))
			return r
		}, []Secret{newSecret}, courier.CodeSignatureMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := newAdCPHMACVerifier(t, ts, tt.secrets...).Verify(context.Background(), tt.req(), body)
			if tt.code != "" {
				wantReject(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if p.KeyID != newSecret.ID() {
				t.Errorf("KeyID = %q, want %q", p.KeyID, newSecret.ID())
			}
		})
	}
}

func TestAdCPHMACConfig(t *testing.T) {
	t.Parallel()
	s := adcpTestSecret(t, "0123456789abcdef0123456789abcdef")
	tests := []struct {
		name string
		cfg  AdCPHMACVerifierConfig
		ok   bool
	}{
		{"ok", AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{s}}, true},
		{"no sender", AdCPHMACVerifierConfig{Secrets: []Secret{s}}, false},
		{"no secrets", AdCPHMACVerifierConfig{Sender: "s"}, false},
		{"zero secret", AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{{}}}, false},
		{"negative tolerance", AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{s}, Tolerance: -time.Minute}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := NewAdCPHMACVerifier(tt.cfg); (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	if _, err := NewAdCPHMACSigner(Secret{}); err == nil {
		t.Error("signer without a secret")
	}
	if d := (AdCPHMACVerifierConfig{}).withDefaults(); d.Tolerance != defaultAdCPHMACTolerance || d.Now == nil {
		t.Errorf("withDefaults = %+v", d)
	}
}
