package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/internal/verified"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
)

// verifyBundle is what a Verify test needs: a sender's signer, the
// receiver's verifier with a stopped clock, and that clock's time.
type verifyBundle struct {
	signer   signature.Signer
	verifier signature.Verifier
	now      time.Time
}

func setupVerify(t *testing.T) verifyBundle {
	t.Helper()
	now := time.Unix(1_790_000_000, 0)
	key := parseKey(t, "k1", signature.NewStandardWebhooksSecret())
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: "billing",
		Keys:   []signature.StandardWebhooksKey{key},
		Now:    func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return verifyBundle{signer: signer, verifier: verifier, now: now}
}

func parseKey(t *testing.T, id, encoded string) signature.StandardWebhooksKey {
	t.Helper()
	k, err := signature.ParseStandardWebhooksKey(id, encoded)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// seen is what the next handler found, echoed back as JSON.
type seen struct {
	Body          []byte
	CtxBody       []byte
	HasCtxBody    bool
	Principal     signature.Principal
	HasPrincipal  bool
	ContentLength int64
}

// verifierFunc adapts a function to signature.Verifier.
type verifierFunc func(context.Context, *http.Request, []byte) (signature.Principal, error)

func (f verifierFunc) Verify(ctx context.Context, r *http.Request, b []byte) (signature.Principal, error) {
	return f(ctx, r, b)
}

// classOnly is a signature failure that carries no courier code.
type classOnly struct{}

func (classOnly) Error() string        { return "rejected" }
func (classOnly) Is(target error) bool { return target == courier.CodeSignatureInvalid }

func TestVerify(t *testing.T) {
	t.Parallel()
	const maxBody = 64
	body := []byte(`{"notification_id":"n-1","amount":42}`)
	tests := []struct {
		name     string
		verifier func(t *testing.T, b verifyBundle) signature.Verifier // nil: the bundle's
		signed   []byte                                                // the bytes signed; nil: the bytes sent
		sent     []byte
		age      time.Duration // how long before the verifier's now it was signed
		unsigned bool
		chunked  bool
		wantCode int
		wantErr  courier.Code // the problem's code
		wantWait string       // Retry-After; "" for none, but "1" on a 503; "none" for none on a 503
	}{
		{name: "valid", sent: body, wantCode: http.StatusOK},
		{name: "valid, chunked", sent: body, chunked: true, wantCode: http.StatusOK},
		{name: "valid, exactly at the limit", sent: bytes.Repeat([]byte("a"), maxBody), wantCode: http.StatusOK},
		{name: "valid, empty body", sent: []byte{}, wantCode: http.StatusOK},
		{name: "tampered body", signed: body, sent: bytes.Replace(body, []byte("42"), []byte("43"), 1),
			wantCode: http.StatusUnauthorized, wantErr: courier.CodeSignatureMismatch},
		{name: "wrong secret", sent: body, verifier: func(t *testing.T, b verifyBundle) signature.Verifier {
			v, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
				Sender: "billing",
				Keys:   []signature.StandardWebhooksKey{parseKey(t, "k2", signature.NewStandardWebhooksSecret())},
				Now:    func() time.Time { return b.now },
			})
			if err != nil {
				t.Fatal(err)
			}
			return v
		}, wantCode: http.StatusUnauthorized, wantErr: courier.CodeSignatureMismatch},
		{name: "stale timestamp", sent: body, age: 10 * time.Minute,
			wantCode: http.StatusUnauthorized, wantErr: courier.CodeSignatureTimestamp},
		{name: "unsigned", sent: body, unsigned: true, wantCode: http.StatusUnauthorized, wantErr: courier.CodeSignatureMissing},
		{name: "failure without a code", sent: body, verifier: func(*testing.T, verifyBundle) signature.Verifier {
			return verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
				return signature.Principal{}, classOnly{}
			})
		}, wantCode: http.StatusUnauthorized, wantErr: courier.CodeSignatureInvalid},
		{name: "failure with an unquotable code", sent: body, verifier: func(*testing.T, verifyBundle) signature.Verifier {
			return verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
				return signature.Principal{}, fmt.Errorf("%w: %w", courier.Code(`bad", x="y`), courier.CodeSignatureInvalid)
			})
		}, wantCode: http.StatusUnauthorized, wantErr: courier.CodeSignatureInvalid},
		{name: "revocation data stale", sent: body, verifier: func(*testing.T, verifyBundle) signature.Verifier {
			return verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
				return signature.Principal{}, fmt.Errorf("%w: %w", courier.CodeWebhookRevocationStale, courier.CodeSignatureInvalid)
			})
		}, wantCode: http.StatusServiceUnavailable, wantErr: courier.CodeWebhookRevocationStale, wantWait: "none"},
		{name: "revocation data stale, the code alone", sent: body, verifier: func(*testing.T, verifyBundle) signature.Verifier {
			return verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
				return signature.Principal{}, fmt.Errorf("revocation list: %w", courier.CodeWebhookRevocationStale)
			})
		}, wantCode: http.StatusServiceUnavailable, wantErr: courier.CodeWebhookRevocationStale, wantWait: "none"},
		{name: "key at its cap of live nonces", sent: body, verifier: func(*testing.T, verifyBundle) signature.Verifier {
			return verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
				return signature.Principal{}, fmt.Errorf("%w: %w", courier.CodeWebhookRateAbuse, courier.CodeSignatureInvalid)
			})
		}, wantCode: http.StatusTooManyRequests, wantErr: courier.CodeWebhookRateAbuse, wantWait: "421"},
		{name: "oversized", sent: bytes.Repeat([]byte("a"), maxBody+1),
			wantCode: http.StatusRequestEntityTooLarge, wantErr: courier.CodeBodyTooLarge},
		{name: "oversized, chunked", sent: bytes.Repeat([]byte("a"), maxBody+1), chunked: true,
			wantCode: http.StatusRequestEntityTooLarge, wantErr: courier.CodeBodyTooLarge},
		{name: "verifier unavailable", sent: body, verifier: func(*testing.T, verifyBundle) signature.Verifier {
			return verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
				return signature.Principal{}, errors.New("replay cache: connection refused")
			})
		}, wantCode: http.StatusServiceUnavailable, wantErr: courier.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupVerify(t)
			var v signature.Verifier = b.verifier
			if tt.verifier != nil {
				v = tt.verifier(t, b)
			}
			var called atomic.Bool
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				called.Store(true)
				var s seen
				s.Body, _ = io.ReadAll(r.Body)
				s.CtxBody, s.HasCtxBody = verified.Body(r.Context())
				s.Principal, s.HasPrincipal = middleware.PrincipalFromContext(r.Context())
				s.ContentLength = r.ContentLength
				json.NewEncoder(w).Encode(s)
			})
			srv := httptest.NewServer(middleware.Verify(v, middleware.BodyLimits{MaxBytes: maxBody})(next))
			t.Cleanup(srv.Close)

			signed := tt.signed
			if signed == nil {
				signed = tt.sent
			}
			resp := post(t, srv.Client(), srv.URL, tt.sent, tt.chunked, func(req *http.Request) {
				if tt.unsigned {
					return
				}
				m := signature.Message{ID: "n-1", Body: signed, Time: b.now.Add(-tt.age)}
				if err := b.signer.Sign(req, m); err != nil {
					t.Fatal(err)
				}
			})
			got := readAll(t, resp)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status = %d, want %d (body %q)", resp.StatusCode, tt.wantCode, got)
			}

			if tt.wantCode != http.StatusOK {
				if called.Load() {
					t.Error("next was called")
				}
				if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != tt.wantErr {
					t.Errorf("code = %q, want %q", p.Code, tt.wantErr)
				}
				wantAuth := ""
				if tt.wantCode == http.StatusUnauthorized {
					wantAuth = `Signature error="` + string(tt.wantErr) + `"`
				}
				if a := resp.Header.Get("WWW-Authenticate"); a != wantAuth {
					t.Errorf("WWW-Authenticate = %q, want %q", a, wantAuth)
				}
				wantRetry := tt.wantWait
				switch {
				case wantRetry == "none":
					wantRetry = ""
				case wantRetry == "" && tt.wantCode == http.StatusServiceUnavailable:
					wantRetry = "1"
				}
				if ra := resp.Header.Get("Retry-After"); ra != wantRetry {
					t.Errorf("Retry-After = %q, want %q", ra, wantRetry)
				}
				return
			}

			var s seen
			if err := json.Unmarshal(got, &s); err != nil {
				t.Fatalf("decode %q: %v", got, err)
			}
			if !bytes.Equal(s.Body, tt.sent) || !s.HasCtxBody || !bytes.Equal(s.CtxBody, tt.sent) {
				t.Errorf("next read %q and found %q (%v) in the context, want %q", s.Body, s.CtxBody, s.HasCtxBody, tt.sent)
			}
			if s.ContentLength != int64(len(tt.sent)) {
				t.Errorf("next saw ContentLength %d, want %d", s.ContentLength, len(tt.sent))
			}
			want := signature.Principal{Sender: "billing", KeyID: "k1", Scheme: signature.SchemeStandardWebhooks, MessageID: "n-1"}
			if !s.HasPrincipal || s.Principal != want {
				t.Errorf("principal = %+v (%v), want %+v", s.Principal, s.HasPrincipal, want)
			}
		})
	}
}

func TestVerifyPanicsOnInvalidConfig(t *testing.T) {
	t.Parallel()
	b := setupVerify(t)
	var typedNil *nilVerifier
	mustPanic(t, func() { middleware.Verify(nil, middleware.BodyLimits{}) })
	mustPanic(t, func() { middleware.Verify(typedNil, middleware.BodyLimits{}) })
	for _, l := range invalidLimits() {
		mustPanic(t, func() { middleware.Verify(b.verifier, l) })
	}
}

func TestContextGettersOnEmptyContext(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if _, ok := verified.Body(ctx); ok {
		t.Error("verified.Body found a body")
	}
	if _, ok := middleware.PrincipalFromContext(ctx); ok {
		t.Error("PrincipalFromContext found a principal")
	}
	if _, ok := middleware.TxFromContext(ctx); ok {
		t.Error("TxFromContext found a transaction")
	}
}

// nilVerifier is a Verifier whose typed nil pointer Verify must refuse.
type nilVerifier struct{}

func (*nilVerifier) Verify(context.Context, *http.Request, []byte) (signature.Principal, error) {
	return signature.Principal{}, nil
}

// TestAVerifierFailureIsLogged: a verifier that cannot answer (a key or
// replay store that is down) is answered 503 internal_error, and its
// error went nowhere. Verify logs it at Error, on the logger of the
// Recover around it.
func TestAVerifierFailureIsLogged(t *testing.T) {
	t.Parallel()
	var logs logtest.Records
	down := verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
		return signature.Principal{}, errors.New("replay cache: connection refused")
	})
	h := middleware.Recover(slog.New(&logs))(middleware.Verify(down, middleware.BodyLimits{})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("next ran for a request its verifier could not check")
	})))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte(`{}`))))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("answered %d, want 503", rec.Code)
	}
	recs := logs.All()
	if len(recs) != 1 || recs[0].Level != slog.LevelError || recs[0].Message != "middleware: signature could not be verified now" {
		t.Fatalf("logged %d records; want one Error line saying the signature could not be verified", len(recs))
	}
	var cause string
	recs[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			cause = a.Value.String()
		}
		return true
	})
	if !strings.Contains(cause, "replay cache: connection refused") {
		t.Fatalf("the line's error is %q, want the verifier's", cause)
	}
}

// TestAVerifierCutShortByItsClientIsLoggedAtInfo: a verifier that asks a
// store with the request's context fails with its end when the client
// goes away: Verify logs that at Info, as Transaction does, not as the
// verifier's trouble at Error.
func TestAVerifierCutShortByItsClientIsLoggedAtInfo(t *testing.T) {
	t.Parallel()
	var logs logtest.Records
	asks := verifierFunc(func(ctx context.Context, _ *http.Request, _ []byte) (signature.Principal, error) {
		return signature.Principal{}, fmt.Errorf("replay cache: %w", ctx.Err())
	})
	h := middleware.Recover(slog.New(&logs))(middleware.Verify(asks, middleware.BodyLimits{})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("next ran for a request its verifier could not check")
	})))
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the client went away
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader([]byte(`{}`))))
	recs := logs.All()
	if len(recs) != 1 || recs[0].Level != slog.LevelInfo || recs[0].Message != "middleware: signature check ended by its client" {
		t.Fatalf("logged %d records (%v); want one Info line, the check ended by its client", len(recs), logs.Messages(slog.LevelDebug))
	}
}
