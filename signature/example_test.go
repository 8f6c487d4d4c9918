package signature_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/signature"
)

// A sender signs each attempt with Standard Webhooks; the receiver verifies
// with the same secret. During a rotation the sender signs with both keys
// and the receiver holds both.
func ExampleNewStandardWebhooksSigner() {
	key, err := signature.ParseStandardWebhooksKey("2026-04", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		panic(err)
	}
	body := []byte(`{"test": 2432232314}`)
	sent := time.Unix(1614265330, 0)
	req, err := http.NewRequest(http.MethodPost, "https://receiver.example/hooks", strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	if err := signer.Sign(req, signature.Message{ID: "msg_p5jXN8AQM9LWM0D4loKWxJek", Body: body, Time: sent}); err != nil {
		panic(err)
	}
	fmt.Println(req.Header.Get("webhook-signature"))

	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: "billing",
		Keys:   []signature.StandardWebhooksKey{key},
		Now:    func() time.Time { return sent.Add(time.Minute) }, // a test clock; leave nil in production
	})
	if err != nil {
		panic(err)
	}
	p, err := verifier.Verify(context.Background(), req, body)
	fmt.Println(p, err)

	_, err = verifier.Verify(context.Background(), req, []byte(`{"test": 0}`))
	fmt.Println(courier.CodeOf(err))
	// Output:
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
	// {billing 2026-04 standard-webhooks msg_p5jXN8AQM9LWM0D4loKWxJek} <nil>
	// signature_mismatch
}

// A sender on Svix: the same scheme under svix-* header names. The
// Standard Webhooks verifier accepts them as they come; MessageID is the
// signed svix-id, the identity to dedupe by.
func ExampleNewStandardWebhooksVerifier_svix() {
	key, err := signature.ParseStandardWebhooksKey("svix", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: "svix-app",
		Keys:   []signature.StandardWebhooksKey{key},
		Now:    func() time.Time { return time.Unix(1614265330, 0) }, // a test clock; leave nil in production
	})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"test": 2432232314}`)
	req, err := http.NewRequest(http.MethodPost, "https://receiver.example/hooks", strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	req.Header.Set("svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	req.Header.Set("svix-timestamp", "1614265330")
	req.Header.Set("svix-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	p, err := verifier.Verify(context.Background(), req, body)
	fmt.Println(p.MessageID, err)

	req.Header.Set("webhook-id", "msg_other") // a second brand that disagrees
	_, err = verifier.Verify(context.Background(), req, body)
	fmt.Println(courier.CodeOf(err))
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek <nil>
	// signature_malformed
}

// An AdCP agent signs webhooks with its request-signing key; the buyer
// verifies them against the agent's published JWK Set, with a shared replay
// cache.
func ExampleNewRFC9421Signer() {
	key, err := signature.GenerateJWK("agent-2026", signature.AlgEd25519)
	if err != nil {
		panic(err)
	}
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"task_id":"task_456","status":"completed"}`)
	req, err := http.NewRequest(http.MethodPost, "https://buyer.example.com/adcp/webhook/op_abc", strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := signer.Sign(req, signature.Message{ID: "n1", Body: body, Time: time.Now()}); err != nil {
		panic(err)
	}
	fmt.Println(req.Header.Get("Content-Digest"))

	verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
		Sender: "agent.example",
		Keys:   []signature.JWK{key.Public()}, // from the agent's jwks_uri
		Origin: "https://buyer.example.com",   // this receiver, as senders address it
		// Replay: nil remembers nonces in this process; a receiver with
		// several processes passes its Store's shared cache (s.Replay).
	})
	if err != nil {
		panic(err)
	}
	p, err := verifier.Verify(context.Background(), req, body)
	fmt.Println(p, err)

	_, err = verifier.Verify(context.Background(), req, body) // delivered twice
	fmt.Println(courier.CodeOf(err))
	// Output:
	// sha-256=:WQthhF/otiJ6WKfNyfKDV48QgQ7ntWKKgzAJmbuJVV0=:
	// {agent.example agent-2026 rfc9421 } <nil>
	// webhook_signature_replayed
}

// The legacy AdCP HMAC scheme, with AdCP's published test vector.
func ExampleNewAdCPHMACSigner() {
	secret, err := signature.ParseSecret("", "cc237f7fe354609bb41360c6530a2deb7926f3cc55e91df3ff90e37202950b6c")
	if err != nil {
		panic(err)
	}
	signer, err := signature.NewAdCPHMACSigner(secret)
	if err != nil {
		panic(err)
	}
	body := []byte(`{}`)
	sent := time.Unix(1700000000, 0)
	req, err := http.NewRequest(http.MethodPost, "https://buyer.example.com/hook", strings.NewReader(string(body)))
	if err != nil {
		panic(err)
	}
	if err := signer.Sign(req, signature.Message{ID: "n1", Body: body, Time: sent}); err != nil {
		panic(err)
	}
	fmt.Println(req.Header.Get("X-ADCP-Timestamp"), req.Header.Get("X-ADCP-Signature"))

	verifier, err := signature.NewAdCPHMACVerifier(signature.AdCPHMACVerifierConfig{
		Sender:  "seller",
		Secrets: []signature.Secret{secret},
		Now:     func() time.Time { return sent }, // a test clock
	})
	if err != nil {
		panic(err)
	}
	p, err := verifier.Verify(context.Background(), req, body)
	fmt.Println(p.Scheme, err)
	fmt.Println(secret) // secrets print redacted
	// Output:
	// 1700000000 sha256=06338bfc687c7a3677ea16420e527469d6717bb966451d29c685de8f0270f073
	// adcp-hmac <nil>
	// Secret("secret:27bb163515cae2c7" [REDACTED])
}

// Bearer tokens: the receiver accepts any of its configured tokens.
func ExampleNewBearerSigner() {
	current, err := signature.ParseSecret("current", "tok_0123456789abcdef0123456789abcdef")
	if err != nil {
		panic(err)
	}
	previous, err := signature.ParseSecret("previous", "tok_fedcba9876543210fedcba9876543210")
	if err != nil {
		panic(err)
	}
	signer, err := signature.NewBearerSigner(current)
	if err != nil {
		panic(err)
	}
	req, err := http.NewRequest(http.MethodPost, "https://buyer.example.com/hook", nil)
	if err != nil {
		panic(err)
	}
	if err := signer.Sign(req, signature.Message{}); err != nil {
		panic(err)
	}
	verifier, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{
		Sender: "seller",
		Tokens: []signature.Secret{previous, current},
	})
	if err != nil {
		panic(err)
	}
	p, err := verifier.Verify(context.Background(), req, nil)
	fmt.Println(p, err)

	req.Header.Set("Authorization", "Bearer tok_guess")
	_, err = verifier.Verify(context.Background(), req, nil)
	fmt.Println(err)
	// Output:
	// {seller current bearer } <nil>
	// signature_mismatch: bearer token matches no configured token
}

// A sender's published JWK Set (its jwks_uri) may hold keys for other
// purposes beside its signing keys: ParseJWKSet keeps the keys a receiver
// verifies with and skips the rest (an RSA key, an X25519 key for
// encryption). A set with no such key is refused.
func ExampleParseJWKSet() {
	published := []byte(`{"keys":[
		{"kty":"OKP","crv":"Ed25519","kid":"agent-2026","use":"sig","alg":"EdDSA",
		 "key_ops":["verify"],"adcp_use":"request-signing","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
		{"kty":"RSA","kid":"legacy-rsa","use":"sig","n":"sXch","e":"AQAB"},
		{"kty":"OKP","crv":"X25519","kid":"agent-enc","use":"enc","x":"hSDwCYkwp1R0i33ctD73Wg2_Og0mOBr066SpjqqbTmo"}
	]}`)
	keys, err := signature.ParseJWKSet(published)
	if err != nil {
		panic(err)
	}
	for _, k := range keys {
		fmt.Println(k.KeyID())
	}

	_, err = signature.ParseJWKSet([]byte(`{"keys":[{"kty":"RSA","kid":"legacy-rsa","n":"sXch","e":"AQAB"}]}`))
	fmt.Println(courier.CodeOf(err))
	// Output:
	// agent-2026
	// config_invalid
}

// A receiver that fetches its sender's published JWK Set (the sender's
// jwks_uri; here a local server) instead of holding the keys in its
// configuration: the verifier's LookupKey is the set's, which answers from
// the set it fetched last and fetches it again when a request names a key
// it does not hold, so a key the sender has just published verifies at
// once.
//
// Anyone can send a request naming a made-up key, so a miss fetches at
// most once per MissInterval. A miss it may not fetch for is not "key
// unknown", answered 401, which a courier sender fails for good: a key
// published since the last fetch would fail the deliveries signed with
// it. It is an error, answered 503, and the sender comes back once the
// set may be fetched again.
func ExampleJWKSet() {
	ctx := context.Background()
	current, err := signature.GenerateJWK("agent-2026", signature.AlgEd25519)
	if err != nil {
		panic(err)
	}

	// The sender publishes the public half of its keys.
	var mu sync.Mutex
	published := []signature.JWK{current.Public()}
	jwksURI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		if err := json.NewEncoder(w).Encode(map[string][]signature.JWK{"keys": published}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	defer jwksURI.Close()

	// The receiver fetches them. (Its clock is the example's, to show a
	// minute passing.)
	now := time.Now()
	keys, err := signature.NewJWKSet(signature.JWKSetConfig{
		URL:          jwksURI.URL + "/.well-known/jwks.json", // https, or http to a loopback host
		MissInterval: time.Minute,                            // the default
		Now:          func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
		Sender:    "agent.example",
		Origin:    "https://buyer.example.com",
		LookupKey: keys.LookupKey,
	})
	if err != nil {
		panic(err)
	}

	// A request signed with key, as the sender's worker sends it.
	send := func(key signature.JWK) error {
		signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
		if err != nil {
			return err
		}
		body := []byte(`{"task_id":"task_456","status":"completed"}`)
		req, err := http.NewRequest(http.MethodPost, "https://buyer.example.com/adcp/webhook", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req, signature.Message{ID: "n1", Body: body, Time: time.Now()}); err != nil {
			return err
		}
		_, err = verifier.Verify(ctx, req, body)
		return err
	}
	fmt.Println("agent-2026:", send(current))

	// A rotation: the sender publishes its next key, then signs with it.
	next, err := signature.GenerateJWK("agent-2027", signature.AlgEd25519)
	if err != nil {
		panic(err)
	}
	mu.Lock()
	published = append(published, next.Public())
	mu.Unlock()
	now = now.Add(time.Minute)
	fmt.Println("agent-2027:", send(next))

	unpublished, err := signature.GenerateJWK("agent-2099", signature.AlgEd25519)
	if err != nil {
		panic(err)
	}
	// A key never published, named within a minute of the last fetch:
	// answered 503, without a fetch.
	fmt.Println("agent-2099:", send(unpublished))

	// A minute later, the set is fetched again and does not name it:
	// answered 401, which the sender does not retry.
	now = now.Add(time.Minute)
	fmt.Println("agent-2099, a minute later:", courier.CodeOf(send(unpublished)))
	// Output:
	// agent-2026: <nil>
	// agent-2027: <nil>
	// agent-2099: signature: rfc9421: key lookup: signature: jwk set: the key id is not in the set, fetched too recently to fetch again
	// agent-2099, a minute later: webhook_signature_key_unknown
}
