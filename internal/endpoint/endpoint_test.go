package endpoint_test

import (
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/endpoint"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, want string }{
		{"https://user:pass@h.example/p?token=SECRET#frag", "https://h.example/…"},
		{"https://h.example:8443/a/b", "https://h.example:8443/…"},
		{"https://hooks.example/services/T0/B0/Zk3Qp9xW2sR7", "https://hooks.example/…"},
		{"https://user@h.example", "https://h.example"},
		{"https://h.example/?token=SECRET", "https://h.example/"},
		{"http://[::1]:8080/p?x=1", "http://[::1]:8080/…"},
		{"https://h.example/a%2Fb?k=v", "https://h.example/…"},
		{"://bad", "invalid-url"},
	} {
		if got := endpoint.Redact(tc.raw); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

func TestRef(t *testing.T) {
	t.Parallel()
	a, b := endpoint.Ref("https://h.example/p?token=A"), endpoint.Ref("https://h.example/p?token=B")
	if !endpoint.IsRef(a) || !endpoint.IsRef(b) || a == b || a != endpoint.Ref("https://h.example/p?token=A") {
		t.Fatalf("refs %q %q", a, b)
	}
	// printf '%s' https://h.example/p | sha256sum | cut -c1-32
	if got := endpoint.Ref("https://h.example/p"); got != "56e60b68e8d752d0dfa512debbcbdcee" {
		t.Errorf("Ref = %s", got)
	}
	for _, s := range []string{"", strings.Repeat("a", 31), strings.Repeat("a", 33), strings.Repeat("A", 32), strings.Repeat("g", 32)} {
		if endpoint.IsRef(s) {
			t.Errorf("IsRef(%q)", s)
		}
	}
}
