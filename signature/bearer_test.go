package signature

import (
	"context"
	"net/http"
	"testing"

	"github.com/courier-go/courier"
)

func TestBearer(t *testing.T) {
	t.Parallel()
	oldTok := adcpTestSecret(t, "old-token-0123456789abcdef0123456789")
	newTok := adcpTestSecret(t, "new-token-0123456789abcdef0123456789")
	verifier, err := NewBearerVerifier(BearerVerifierConfig{Sender: "seller", Tokens: []Secret{oldTok, newTok}})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewBearerSigner(newTok)
	if err != nil {
		t.Fatal(err)
	}
	signed := newRequest(t, http.MethodPost, "https://buyer.example/hook", nil, nil)
	if err := signer.Sign(signed, Message{}); err != nil {
		t.Fatal(err)
	}
	if got := signed.Header.Get("Authorization"); got != "Bearer new-token-0123456789abcdef0123456789" {
		t.Fatalf("Authorization = %q", got)
	}

	tests := []struct {
		name    string
		lines   []string
		code    courier.Code // "" means accepted
		wantKey string
	}{
		{"signed", signed.Header.Values("Authorization"), "", newTok.ID()},
		{"old token", []string{"Bearer old-token-0123456789abcdef0123456789"}, "", oldTok.ID()},
		{"scheme case", []string{"bearer old-token-0123456789abcdef0123456789"}, "", oldTok.ID()},
		{"two spaces", []string{"Bearer  old-token-0123456789abcdef0123456789"}, "", oldTok.ID()},
		{"missing", nil, courier.CodeSignatureMissing, ""},
		{"empty", []string{""}, courier.CodeSignatureMissing, ""},
		{"scheme only", []string{"Bearer"}, courier.CodeSignatureMalformed, ""},
		{"scheme and space", []string{"Bearer "}, courier.CodeSignatureMalformed, ""},
		{"basic scheme", []string{"Basic old-token-0123456789abcdef0123456789"}, courier.CodeSignatureMalformed, ""},
		{"token with space", []string{"Bearer old-token 0123456789abcdef0123456789"}, courier.CodeSignatureMalformed, ""},
		{"repeated", []string{"Bearer old-token-0123456789abcdef0123456789", "Bearer old-token-0123456789abcdef0123456789"}, courier.CodeSignatureMalformed, ""},
		{"prefix of a token", []string{"Bearer old-token-0123456789abcdef012345678"}, courier.CodeSignatureMismatch, ""},
		{"token plus a byte", []string{"Bearer old-token-0123456789abcdef0123456789a"}, courier.CodeSignatureMismatch, ""},
		{"other token", []string{"Bearer zzz-token-0123456789abcdef0123456789"}, courier.CodeSignatureMismatch, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := newRequest(t, http.MethodPost, "https://buyer.example/hook", map[string][]string{"Authorization": tt.lines}, nil)
			p, err := verifier.Verify(context.Background(), req, nil)
			if tt.code != "" {
				wantReject(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if p != (Principal{Sender: "seller", KeyID: tt.wantKey, Scheme: SchemeBearer}) {
				t.Errorf("principal = %+v", p)
			}
		})
	}
}

func TestBearerConfig(t *testing.T) {
	t.Parallel()
	tok := adcpTestSecret(t, "token-0123456789abcdef0123456789abc")
	tests := []struct {
		name string
		cfg  BearerVerifierConfig
		ok   bool
	}{
		{"ok", BearerVerifierConfig{Sender: "s", Tokens: []Secret{tok}}, true},
		{"no sender", BearerVerifierConfig{Tokens: []Secret{tok}}, false},
		{"no tokens", BearerVerifierConfig{Sender: "s"}, false},
		{"zero token", BearerVerifierConfig{Sender: "s", Tokens: []Secret{{}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := NewBearerVerifier(tt.cfg); (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	if _, err := NewBearerSigner(Secret{}); err == nil {
		t.Error("signer without a token")
	}
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value string
		ok    bool
	}{
		{"32 bytes", "0123456789abcdef0123456789abcdef", true},
		{"31 bytes", "0123456789abcdef0123456789abcde", false},
		{"4096 bytes", repeatPattern(4096), true},
		{"4097 bytes", repeatPattern(4097), false},
		{"space", "0123456789abcdef 0123456789abcdef", false},
		{"newline", "0123456789abcdef0123456789abcdef\n", false},
		{"non-ASCII", "0123456789abcdef0123456789abcdeé", false},
		{"one repeated character", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := ParseSecret("", tt.value)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && s.ID() == "" {
				t.Error("empty fingerprint id")
			}
		})
	}
	if s, _ := ParseSecret("primary", "0123456789abcdef0123456789abcdef"); s.ID() != "primary" {
		t.Errorf("ID = %q", s.ID())
	}
}

func repeatPattern(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghij"[i%10]
	}
	return string(b)
}
