package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/serve"
)

// TestSenderGuardClosedByDefault: the example's worker opened its SSRF
// guard for loopback unless told otherwise. With no flags the guard is
// closed: a delivery to a loopback receiver is refused before it is sent.
func TestSenderGuardClosedByDefault(t *testing.T) {
	t.Parallel()
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }))
	defer srv.Close()

	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.allowPrivate {
		t.Fatal("-allow-private defaults to true")
	}
	for _, tc := range []struct {
		allowPrivate bool
		wantRefused  bool
	}{{o.allowPrivate, true}, {true, false}} {
		guard, err := guardFor(srv.URL, tc.allowPrivate)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("{}"))
		resp, err := guard.Transport().RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		if refused := errors.Is(err, courier.CodeDestinationForbidden); refused != tc.wantRefused {
			t.Errorf("allow-private=%v: refused=%v (%v), want %v", tc.allowPrivate, refused, err, tc.wantRefused)
		}
	}
	if hits != 1 {
		t.Errorf("the receiver saw %d requests, want 1 (the opened guard's)", hits)
	}
}

// TestSenderTakesNoSecretFromArgs: the secret was a flag, visible in ps.
// Now there is no such flag: it comes from the environment or a file.
func TestSenderTakesNoSecretFromArgs(t *testing.T) {
	if _, err := parseFlags([]string{"-secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}); err == nil {
		t.Fatal("-secret is accepted on the command line")
	}
	t.Setenv("COURIER_SECRET", "")
	o, _ := parseFlags(nil)
	if _, err := serve.Secret(o.secretFile); err == nil {
		t.Fatal("no secret in the environment or a file, yet one was found")
	}
}
