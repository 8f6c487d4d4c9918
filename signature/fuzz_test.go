package signature

import (
	"context"
	"crypto/sha256"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/adcpvectors"
)

// Fuzz targets for every header parser. Seeds come from the conformance
// vectors; `go test` runs the seeds, `go test -fuzz=FuzzX` explores.

func FuzzStandardWebhooksSignature(f *testing.F) {
	var vecs swVectors
	loadJSON(f, swVectorsPath, &vecs)
	for _, v := range append(vecs.Sign, vecs.Reject...) {
		f.Add(v.Signature, strconv.FormatInt(v.Timestamp, 10))
	}
	f.Add(vecs.Multi.Header, "1614265330")
	f.Add("v1a,"+strings.Repeat("A", 86)+"== v1,,", "01614265330")
	vec := vecs.Sign[0]
	key, err := ParseStandardWebhooksKey("", vec.Secret)
	if err != nil {
		f.Fatal(err)
	}
	v, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{key}, Now: clockAt(vec.Timestamp)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, header, ts string) {
		req, _ := http.NewRequest(http.MethodPost, "https://r.example/", nil)
		req.Header[http.CanonicalHeaderKey(headerWebhookID)] = []string{vec.MsgID}
		req.Header[http.CanonicalHeaderKey(headerWebhookTimestamp)] = []string{ts}
		req.Header[http.CanonicalHeaderKey(headerWebhookSignature)] = []string{header}
		_, err := v.Verify(context.Background(), req, []byte(vec.Body))
		if err == nil && (ts != "1614265330" || !strings.Contains(header, strings.TrimPrefix(vec.Signature, "v1,"))) {
			t.Fatalf("verified header %q at %q", header, ts)
		}
	})
}

// FuzzStandardWebhooksBrands sends the webhook-* and svix-* headers in
// every combination (an empty string is an absent header). Whatever
// verifies used one brand, or two identical ones, carrying the vector's id,
// timestamp and signature.
func FuzzStandardWebhooksBrands(f *testing.F) {
	var vecs swVectors
	loadJSON(f, swVectorsPath, &vecs)
	vec := vecs.Sign[0]
	ts := strconv.FormatInt(vec.Timestamp, 10)
	f.Add(vec.MsgID, ts, vec.Signature, "", "", "")
	f.Add("", "", "", vec.MsgID, ts, vec.Signature)
	f.Add(vec.MsgID, ts, vec.Signature, vec.MsgID, ts, vec.Signature)
	f.Add(vec.MsgID, ts, vec.Signature, "msg_other", ts, vec.Signature)
	f.Add("", ts, vec.Signature, vec.MsgID, "", "")
	key, err := ParseStandardWebhooksKey("", vec.Secret)
	if err != nil {
		f.Fatal(err)
	}
	v, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{key}, Now: clockAt(vec.Timestamp)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, wid, wts, wsig, sid, sts, ssig string) {
		req, _ := http.NewRequest(http.MethodPost, "https://r.example/", nil)
		values := [6]string{wid, wts, wsig, sid, sts, ssig}
		names := [6]string{headerWebhookID, headerWebhookTimestamp, headerWebhookSignature, headerSvixID, headerSvixTimestamp, headerSvixSignature}
		for i, val := range values {
			if val != "" {
				req.Header[http.CanonicalHeaderKey(names[i])] = []string{val}
			}
		}
		p, err := v.Verify(context.Background(), req, []byte(vec.Body))
		if err != nil {
			return
		}
		webhook, svix := wid+wts+wsig != "", sid+sts+ssig != ""
		used := [3]string{wid, wts, wsig}
		if !webhook {
			used = [3]string{sid, sts, ssig}
		}
		if webhook && svix && [3]string{wid, wts, wsig} != [3]string{sid, sts, ssig} {
			t.Fatalf("verified two brands that disagree: %q", values)
		}
		if used[0] != vec.MsgID || used[1] != ts || !strings.Contains(used[2], strings.TrimPrefix(vec.Signature, "v1,")) || p.MessageID != vec.MsgID {
			t.Fatalf("verified %q as %+v", values, p)
		}
	})
}

func FuzzSignatureHeaders(f *testing.F) {
	for _, kind := range []string{"positive", "negative"} {
		paths, _ := filepath.Glob(filepath.Join(webhookSigningDir, kind, "*.json"))
		for _, p := range paths {
			var vec webhookVector
			loadJSON(f, p, &vec)
			f.Add(vec.Request.Headers["Signature-Input"], vec.Request.Headers["Signature"])
		}
	}
	f.Add(`sig-b26=("date" "@method");created=1618884473;keyid="test-key-ed25519"`, `sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:`)
	f.Add(`sig1=();a=1.50;b=?0;c=tok/en:x;d, *x=?1`, `sig1=:AAAA:;p`)
	f.Fuzz(func(t *testing.T, input, sig string) {
		h := http.Header{}
		h.Set(headerSignatureInput, input)
		h.Set(headerSignature, sig)
		in, err := parseRFC9421Headers(h)
		if err != nil {
			return
		}
		// The serialized parameters parse back to themselves.
		h.Set(headerSignatureInput, rFC9421Label+"="+in.sigParams)
		again, err := parseRFC9421Headers(h)
		if err != nil || again.sigParams != in.sigParams {
			t.Fatalf("re-serialized %q: %q, %v", in.sigParams, again.sigParams, err)
		}
	})
}

func FuzzSFDictionary(f *testing.F) {
	f.Add(`sig1=("@method" "@target-uri");created=1;nonce="a\"b\\c"`)
	f.Add(`sha-256=:dJ2koiIMZIhdGE7tidErCHV13FFvOIowCcXDiwyG54I=:, sha-512=:AA==:`)
	f.Add(`a=1, b=-2.500, c=?1, d;x=y, e=(1 2.0 "s" t :AA: ?0);p`)
	f.Fuzz(func(t *testing.T, s string) {
		members, err := parseSFDictionary(s)
		if err != nil {
			return
		}
		// Serializing and parsing again gives the same serialization.
		var b strings.Builder
		for i, m := range members {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(m.key)
			if m.isList {
				b.WriteByte('=')
				serializeInnerList(&b, m.list, m.params)
				continue
			}
			if !(m.item.kind == sfBool && m.item.bool) {
				b.WriteByte('=')
				serializeBareItem(&b, m.item)
			}
			serializeParams(&b, m.item.params)
		}
		first := b.String()
		again, err := parseSFDictionary(first)
		if err != nil || len(again) != len(members) {
			t.Fatalf("serialization %q of %q does not parse back: %v", first, s, err)
		}
	})
}

func FuzzContentDigest(f *testing.F) {
	f.Add(`sha-256=:dJ2koiIMZIhdGE7tidErCHV13FFvOIowCcXDiwyG54I=:`, []byte(`{"idempotency_key":"whk_01HW9D3H8FZP2N6R8T0V4X6Z9B","task_id":"task_456","operation_id":"op_abc","status":"completed","result":{"media_buy_id":"mb_001"}}`))
	f.Add(`sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:`, []byte(`{"hello": "world"}`))
	f.Add(`sha-256=:RBNvo1WzZ4oRRq0W9-hknpT7T8If536DEMBg9hyq_4o:`, []byte(`{}`))
	f.Fuzz(func(t *testing.T, field string, body []byte) {
		if !contentDigestMatches(field, body) {
			return
		}
		sum := sha256.Sum256(body)
		members, err := parseSFDictionary(field)
		m, ok := sfLookup(members, "sha-256")
		if err != nil || !ok {
			t.Fatalf("matched %q without a sha-256 member", field)
		}
		got, err := decodeStdBase64(m.item.str)
		if err != nil {
			got, _ = decodeB64URL(m.item.str)
		}
		if string(got) != string(sum[:]) {
			t.Fatalf("matched %q for another body", field)
		}
	})
}

func FuzzAdCPSignature(f *testing.F) {
	var vecs adcpvectors.HMACVectors
	loadJSON(f, adcpHMACVectorsPath, &vecs)
	for _, v := range vecs.Vectors {
		f.Add(v.ExpectedSignature)
	}
	for _, v := range vecs.RejectionVectors {
		if v.Signature != nil {
			f.Add(*v.Signature)
		}
	}
	f.Fuzz(func(t *testing.T, header string) {
		sig, ok := parseAdCPSignature(header)
		if !ok {
			return
		}
		if len(sig) != sha256.Size || !strings.HasPrefix(header, "sha256=") {
			t.Fatalf("parsed %q to %d bytes", header, len(sig))
		}
	})
}

func FuzzCanonicalTarget(f *testing.F) {
	var file struct {
		Cases []struct {
			InputURL string `json:"input_url"`
		} `json:"cases"`
	}
	loadJSON(f, canonicalizationVectorsPath, &file)
	for _, c := range file.Cases {
		f.Add(c.InputURL, false)
	}
	f.Add("https://buyer.example.com/adcp/webhook/op_%e2%98%83?b=2&a=1", true)
	f.Add("https://buyer.example.com/hooks/a?x=1#&x=2", true)
	f.Fuzz(func(t *testing.T, raw string, asReceived bool) {
		target, authority, err := canonicalTarget(raw, asReceived)
		if err != nil {
			return
		}
		// A received target never had a fragment to drop.
		if asReceived && strings.Contains(raw, "#") {
			t.Fatalf("received %q -> %q", raw, target)
		}
		// Canonical output is ASCII and a fixed point, for sender and receiver.
		if !isASCII(target) || !strings.Contains(target, "://"+authority+"/") {
			t.Fatalf("%q -> %q (%q)", raw, target, authority)
		}
		for _, received := range []bool{false, true} {
			again, a2, err := canonicalTarget(target, received)
			if err != nil || again != target || a2 != authority {
				t.Fatalf("%q -> %q -> %q, %v", raw, target, again, err)
			}
		}
	})
}

func FuzzBearerHeader(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("bearer  abc def")
	f.Add("Basic abc")
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := parseBearer(h)
		if ok && (tok == "" || strings.ContainsAny(tok, " \t\r\n")) {
			t.Fatalf("%q -> %q", h, tok)
		}
	})
}
