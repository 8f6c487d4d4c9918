package endpoint_test

import (
	"net/url"
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

// TestRedactURLs: each URL in an error's text is cut as Redact cuts an
// endpoint, wherever it stands and however it ends, and the rest of the
// text is kept.
func TestRedactURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ text, want string }{
		{`Get "https://user:SECRET@vault.example/v1/k?token=SECRET": dial tcp 10.0.0.5:8200: connect: connection refused`,
			`Get "https://vault.example/…": dial tcp 10.0.0.5:8200: connect: connection refused`},
		{"proxyconnect tcp: https://user:SECRET@proxy.example/?token=SECRET: refused", "proxyconnect tcp: https://proxy.example/: refused"},
		{"lookup h on https://u:SECRET@dns.example:853: no such host", "lookup h on https://dns.example:853: no such host"},
		{"a http://SECRET@a.example and b <HTTPS://b.example/SECRET> or 'ftp://c.example?SECRET'", "a http://a.example and b <https://b.example/…> or 'ftp://c.example'"},
		{`Get "https://h.example/a\"SECRET?token=SECRET": boom`, `Get "https://h.example/…": boom`},
		{"see https://u:SECRET@h.example/SECRET, then https://h.example:SECRET.", "see https://h.example/…, then invalid-url."},
		{"key store unavailable: no key k9", "key store unavailable: no key k9"},
		{"mailto:someone@example.com and ://SECRET", "mailto:someone@example.com and ://SECRET"},
	} {
		if got := endpoint.RedactURLs(tc.text); got != tc.want {
			t.Errorf("RedactURLs(%q) = %q, want %q", tc.text, got, tc.want)
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

func TestNormalize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, want string }{
		{"https://example.com/hook", "https://example.com/hook"},
		{"https://Example.COM/hook", "https://example.com/hook"},
		{"HTTPS://example.com:443/hook", "https://example.com/hook"},
		{"http://example.com:80/hook", "http://example.com/hook"},
		{"http://example.com:443/hook", "http://example.com:443/hook"},
		{"https://example.com:80/hook", "https://example.com:80/hook"},
		{"https://example.com:8443", "https://example.com:8443"},
		{"https://example.com:/hook", "https://example.com/hook"},
		{"https://Example.com:443", "https://example.com"},
		{"https://Example.com?Token=A", "https://example.com?Token=A"},
		{"https://Example.com#Frag", "https://example.com#Frag"},
		// userinfo, path and query keep their bytes: they are what is sent
		{"https://User:Pa%41ss@Example.com:443/Hook/%7E?Token=SeCReT", "https://User:Pa%41ss@example.com/Hook/%7E?Token=SeCReT"},
		{"https://a@b@Example.com/X", "https://a@b@example.com/X"},
		{"https://[2001:DB8::1]:443/P", "https://[2001:db8::1]/P"},
		{"https://[2001:DB8::1]:8443/P", "https://[2001:db8::1]:8443/P"},
		{"http://[FE80::1%25En0]:80/P", "http://[fe80::1%25En0]/P"},
		{"not a url", "not a url"},
		{"ftp://Example.com/", "ftp://Example.com/"},
	} {
		got := endpoint.Normalize(tc.raw)
		if got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.raw, got, tc.want)
		}
		if endpoint.Normalize(got) != got {
			t.Errorf("Normalize(%q) = %q is not its own form", tc.raw, got)
		}
		if endpoint.Valid(tc.raw) && !endpoint.Valid(got) {
			t.Errorf("Normalize(%q) = %q is not valid", tc.raw, got)
		}
	}
}

// FuzzNormalize: Normalize keeps a valid endpoint valid, is its own
// normal form, and changes only the case of scheme and host and a default
// or empty port: userinfo, path, query and fragment keep their bytes.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"https://Example.com:443/hook", "http://u:p@H.example:80/a%2Fb?q=1#F", "https://[2001:DB8::1]:443/",
		"https://h.example:/p", "https://a@b@H.example/X?Y", "http://[FE80::1%25En0]:8080/P",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := endpoint.Normalize(raw)
		if !endpoint.Valid(raw) {
			if got != raw {
				t.Fatalf("Normalize(%q) = %q, want an invalid endpoint as it is", raw, got)
			}
			return
		}
		if !endpoint.Valid(got) || endpoint.Normalize(got) != got {
			t.Fatalf("Normalize(%q) = %q: not valid, or not its own normal form", raw, got)
		}
		u, _ := url.Parse(raw)
		v, _ := url.Parse(got)
		if u.User.String() != v.User.String() || u.EscapedPath() != v.EscapedPath() || u.RawQuery != v.RawQuery ||
			u.ForceQuery != v.ForceQuery || u.EscapedFragment() != v.EscapedFragment() {
			t.Fatalf("Normalize(%q) = %q changed userinfo, path, query or fragment", raw, got)
		}
		if !strings.EqualFold(u.Scheme, v.Scheme) || !strings.EqualFold(u.Hostname(), v.Hostname()) {
			t.Fatalf("Normalize(%q) = %q changed the scheme or host beyond their case", raw, got)
		}
		if port := u.Port(); port != v.Port() && !(v.Port() == "" && (port == "" || port == map[string]string{"https": "443", "http": "80"}[v.Scheme])) {
			t.Fatalf("Normalize(%q) = %q changed port %q to %q", raw, got, port, v.Port())
		}
	})
}

// TestDialable: the port an endpoint names, if it names one, is one a
// dial can reach, 1 to 65535: port 0, or one above 65535, fails every
// attempt. A leading zero is the port it spells (:0443 dials 443), and an
// endpoint that names no port takes its scheme's. Valid, which names the
// endpoints already stored, asks none of it.
func TestDialable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		port string // as written after the host's ":"; "" for no port
		want bool
	}{
		{"", true},
		{":", true}, // an empty port is no port
		{":1", true},
		{":443", true},
		{":0443", true},
		{":000000000000000000000443", true},
		{":65535", true},
		{":0", false},
		{":00", false},
		{":65536", false},
		{":99999", false},
		{":18446744073709551617", false}, // past what an int holds
	} {
		for _, host := range []string{"h.example", "[2001:db8::1]", "[fe80::1%25en0]"} {
			raw := "https://" + host + tc.port + "/hooks?token=t"
			if !endpoint.Valid(raw) {
				t.Fatalf("Valid(%q) = false: a port is no part of Valid's rule", raw)
			}
			if got := endpoint.Dialable(raw); got != tc.want {
				t.Errorf("Dialable(%q) = %v, want %v", raw, got, tc.want)
			}
		}
	}
}
