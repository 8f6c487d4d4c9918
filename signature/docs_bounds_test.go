package signature

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
)

// TestToleranceBoundsAsDocumented: a Standard Webhooks or AdCP HMAC
// verifier's Tolerance is zero for the default, or from one second to one
// hour: both ends are taken, one nanosecond less or one second more is
// refused with config_invalid naming the field, as is a negative one and
// one of 12 hours, which would let a request replayed after the inbox's
// shortest retention run the application's function again.
func TestToleranceBoundsAsDocumented(t *testing.T) {
	t.Parallel()
	swSecret, _, _ := swTestKeys(t, "k")
	shared := adcpTestSecret(t, "0123456789abcdefghijklmnopqrstuvwxyz")
	build := map[string]func(time.Duration) error{
		"StandardWebhooksVerifierConfig": func(tol time.Duration) error {
			_, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{swSecret}, Tolerance: tol})
			return err
		},
		"AdCPHMACVerifierConfig": func(tol time.Duration) error {
			_, err := NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{shared}, Tolerance: tol})
			return err
		},
	}
	for cfg, b := range build {
		for _, tc := range []struct {
			tol time.Duration
			ok  bool
		}{{0, true}, {time.Second, true}, {time.Hour, true}, {time.Second - 1, false}, {time.Hour + time.Second, false}, {12 * time.Hour, false}, {-time.Second, false}} {
			err := b(tc.tol)
			switch {
			case tc.ok && err != nil:
				t.Errorf("%s.Tolerance %v: %v", cfg, tc.tol, err)
			case !tc.ok && (courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), cfg+".Tolerance")):
				t.Errorf("%s.Tolerance %v: %v; want config_invalid naming the field", cfg, tc.tol, err)
			}
		}
	}
}

// TestAdCPHMACToleranceAtItsBounds: X-ADCP-Timestamp may be Tolerance
// from the verifier's clock either way, 300 seconds by default, and no
// second more.
func TestAdCPHMACToleranceAtItsBounds(t *testing.T) {
	t.Parallel()
	secret := adcpTestSecret(t, "0123456789abcdefghijklmnopqrstuvwxyz")
	signer, err := NewAdCPHMACSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	const ts = 1_700_000_000
	body := []byte(`{"a":1}`)
	for _, tc := range []struct {
		now       int64
		tolerance time.Duration
		ok        bool
	}{
		{ts + 300, 0, true}, {ts - 300, 0, true}, {ts + 301, 0, false}, {ts - 301, 0, false},
		{ts + 1, time.Second, true}, {ts + 2, time.Second, false},
		{ts - 1, time.Second + 999*time.Millisecond, true}, {ts - 2, time.Second + 999*time.Millisecond, false},
	} {
		req := newRequest(t, http.MethodPost, "https://buyer.example/hook", nil, body)
		if err := signer.Sign(req, Message{ID: "n", Body: body, Time: time.Unix(ts, 0)}); err != nil {
			t.Fatal(err)
		}
		v, err := NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{secret}, Tolerance: tc.tolerance, Now: clockAt(tc.now)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(context.Background(), req, body)
		if tc.ok != (err == nil) {
			t.Errorf("signed at %d, verified at %d with Tolerance %v: %v; want ok %v", ts, tc.now, tc.tolerance, err, tc.ok)
		}
		if !tc.ok && courier.CodeOf(err) != courier.CodeSignatureTimestamp {
			t.Errorf("signed at %d, verified at %d: code %s, want %s", ts, tc.now, courier.CodeOf(err), courier.CodeSignatureTimestamp)
		}
	}
}

// TestRFC9421WindowAndSkewBounds: a signer's Window is 1 to 300 seconds
// and defaults to 300; a verifier's ClockSkew is at most 300 seconds and
// defaults to 60. Each bound is taken and one nanosecond past it refused
// with config_invalid naming the field.
func TestRFC9421WindowAndSkewBounds(t *testing.T) {
	t.Parallel()
	priv, err := GenerateJWK("k1", AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		window time.Duration
		ok     bool
	}{{0, true}, {time.Second, true}, {300 * time.Second, true}, {time.Second - 1, false}, {300*time.Second + 1, false}, {-time.Second, false}} {
		_, err := NewRFC9421Signer(RFC9421SignerConfig{Key: priv, Window: tc.window})
		if tc.ok != (err == nil) || !tc.ok && !strings.Contains(err.Error(), "RFC9421SignerConfig.Window") {
			t.Errorf("Window %v: %v; want ok %v", tc.window, err, tc.ok)
		}
	}
	if d := (RFC9421SignerConfig{}).withDefaults(); d.Window != 300*time.Second {
		t.Errorf("default Window %v, want 300s", d.Window)
	}
	for _, tc := range []struct {
		skew time.Duration
		ok   bool
	}{{0, true}, {time.Second, true}, {300 * time.Second, true}, {300*time.Second + 1, false}, {-1, false}} {
		_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{priv.Public()}, Origin: "https://buyer.example.com", ClockSkew: tc.skew})
		if tc.ok != (err == nil) || !tc.ok && !strings.Contains(err.Error(), "RFC9421VerifierConfig.ClockSkew") {
			t.Errorf("ClockSkew %v: %v; want ok %v", tc.skew, err, tc.ok)
		}
	}
	if d := (RFC9421VerifierConfig{}).withDefaults(); d.ClockSkew != 60*time.Second {
		t.Errorf("default ClockSkew %v, want 60s", d.ClockSkew)
	}
}

// TestRFC9421WindowCountsWholeSeconds: the Window a signer writes is in
// whole seconds, a fraction dropped, as ClockSkew's is: 1.999s signs a
// window of one second, 300.999s is over the bound.
func TestRFC9421WindowCountsWholeSeconds(t *testing.T) {
	t.Parallel()
	priv, err := GenerateJWK("k1", AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	const created = 1_700_000_000
	for _, tc := range []struct {
		window time.Duration
		want   int64
	}{{time.Second + 999*time.Millisecond, 1}, {300*time.Second - time.Millisecond, 299}, {300 * time.Second, 300}} {
		s, err := NewRFC9421Signer(RFC9421SignerConfig{Key: priv, Window: tc.window})
		if err != nil {
			t.Fatal(err)
		}
		req := newRequest(t, http.MethodPost, "https://buyer.example.com/hook", map[string][]string{"Content-Type": {"application/json"}}, []byte(`{}`))
		if err := s.Sign(req, Message{ID: "n-1", Body: []byte(`{}`), Time: time.Unix(created, 0)}); err != nil {
			t.Fatal(err)
		}
		in := req.Header.Get(headerSignatureInput)
		if want := fmt.Sprintf(";created=%d;expires=%d;", created, created+tc.want); !strings.Contains(in, want) {
			t.Errorf("Window %v: Signature-Input %s; want it to hold %s", tc.window, in, want)
		}
	}
	if _, err := NewRFC9421Signer(RFC9421SignerConfig{Key: priv, Window: 300*time.Second + 999*time.Millisecond}); err == nil {
		t.Error("Window 300.999s taken, want it refused")
	}
}
