package signature

import (
	"errors"
	"testing"
)

const canonicalizationVectorsPath = "testdata/adcp/request-signing/canonicalization.json"

func TestCanonicalTargetVectors(t *testing.T) {
	t.Parallel()
	var file struct {
		Cases []struct {
			Name              string `json:"name"`
			InputURL          string `json:"input_url"`
			ExpectedTargetURI string `json:"expected_target_uri"`
			ExpectedAuthority string `json:"expected_authority"`
			Reject            bool   `json:"reject"`
			ExpectedErrorCode string `json:"expected_error_code"`
		} `json:"cases"`
	}
	loadJSON(t, canonicalizationVectorsPath, &file)
	if len(file.Cases) < 37 {
		t.Fatalf("%s: %d cases, want at least 37", canonicalizationVectorsPath, len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			target, authority, err := canonicalTarget(c.InputURL, false)
			if c.Reject {
				if err == nil {
					t.Fatalf("canonicalized to %q; want rejection (%s)", target, c.ExpectedErrorCode)
				}
				// The vectors' code is the request-signing profile's; a
				// webhook verifier answers the same refusal with
				// webhook_target_uri_malformed, which errTargetURI becomes.
				if c.ExpectedErrorCode != "request_target_uri_malformed" || !errors.Is(err, errTargetURI) {
					t.Fatalf("refused with %v; the vector expects %s", err, c.ExpectedErrorCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("canonicalTarget: %v", err)
			}
			if target != c.ExpectedTargetURI {
				t.Errorf("target = %q, want %q", target, c.ExpectedTargetURI)
			}
			if authority != c.ExpectedAuthority {
				t.Errorf("authority = %q, want %q", authority, c.ExpectedAuthority)
			}
			// A receiver canonicalizing what it got on the wire (A-labels)
			// reaches the same bytes.
			if target2, _, err := canonicalTarget(target, true); err != nil || target2 != target {
				t.Errorf("canonical form is not a fixed point: %q, %v", target2, err)
			}
		})
	}
}

func TestCanonicalTargetExtra(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in         string
		asReceived bool
		want       string // "" means rejected
	}{
		{"https://bücher.example/p", true, ""}, // a receiver never re-normalizes a raw U-label
		{"https://ｅｘａｍｐｌｅ.com/p", false, ""},
		{"https://fuß.example/p", false, "https://xn--fu-hia.example/p"},
		{"https://münchen.example/p", false, "https://xn--mnchen-3ya.example/p"},
		{"ftp://example.com/p", false, ""},
		{"https//example.com/p", false, ""},
		{"https://example.com:0/p", false, ""},
		{"https://example.com:65536/p", false, ""},
		{"https://example.com:+80/p", false, ""},
		{"https://example.com:0443/p", false, "https://example.com/p"},
		{"http://example.com:443/p", false, "http://example.com:443/p"},
		{"https://example.com/a%zz", false, ""},
		{"https://example.com/a%2", false, ""},
		{"https://example.com/a b", false, ""},
		{"https://example.com/p?a b", false, ""},
		{"https://exa mple.com/p", false, ""},
		{"https://example.com/%2e%2E/a/%2E/b", false, "https://example.com/a/b"},
		{"https://example.com/caf\xc3\xa9", false, "https://example.com/caf%C3%A9"},
		{"https://example.com/../../a", false, "https://example.com/a"},
		{"https://example.com/a/..", false, "https://example.com/"},
		{"https://[::ffff:1.2.3.4]/p", false, "https://[::ffff:1.2.3.4]/p"},
		{"https://[1.2.3.4]/p", false, ""},
		{"https://[::1]x/p", false, ""},
		{"https://.example.com/p", false, ""},
		{"https://./p", false, ""},
		{"HTTP://EXAMPLE.COM:80", false, "http://example.com/"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, _, err := canonicalTarget(tt.in, tt.asReceived)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("canonicalized to %q; want rejection", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("canonicalTarget = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestPunycode(t *testing.T) {
	t.Parallel()
	// RFC 3492 §7.1 samples (lower-cased) and common labels.
	tests := []struct{ in, want string }{
		{"bücher", "bcher-kva"},
		{"münchen", "mnchen-3ya"},
		{"他们为什么不说中文", "ihqwcrb4cv8a8dqg056pqjye"},
		{"ليهمابتكلموشعربي؟", "egbpdaj6bu4bxfgehfvwxn"},
		{"3年b組金八先生", "3b-ww4c5e180e575a65lsy2b"},
	}
	for _, tt := range tests {
		got, err := punycodeEncode([]rune(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("punycodeEncode(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
