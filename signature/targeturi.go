package signature

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file canonicalizes @target-uri and @authority as the AdCP RFC 9421
// profile requires (RFC 9421 §2.2.2 and §2.2.3 with RFC 3986 §6
// normalization), checked against AdCP's canonicalization vectors:
//
//   - the scheme (http or https) and the host are lower-cased; a U-label
//     host becomes its Punycode A-label; one trailing root dot is dropped; an
//     empty DNS label, a bare or zoned IPv6 literal, or an empty host is
//     malformed;
//   - userinfo and the fragment of a sender's URL are dropped; a received
//     target with "#" is malformed; the scheme's default port is dropped,
//     any other port is kept;
//   - in the path, percent-encodings of unreserved characters are decoded,
//     the others upper-cased, dot segments removed (consecutive slashes
//     stay), and an empty path becomes "/";
//   - the query is kept byte for byte, including a lone "?" (a non-ASCII
//     byte, which a URI cannot carry, is percent-encoded).

var errTargetURI = errors.New("malformed target URI")

// maxTargetURIBytes bounds the URI canonicalized, and its canonical form.
const maxTargetURIBytes = 8 << 10

// canonicalTarget returns the canonical @target-uri and @authority of the
// absolute URI raw. With asReceived, raw is what a receiver reconstructed
// from the wire and a non-ASCII host is malformed (a Host header carries
// A-labels; receivers never re-normalize), as is a "#": a request target
// carries no fragment, and net/http serves one that has "#" with what
// follows it in the path or query the handler reads, which dropping it
// here would leave unsigned. Otherwise raw is a sender's URL, its U-labels
// are converted and its fragment dropped.
func canonicalTarget(raw string, asReceived bool) (target, authority string, err error) {
	if len(raw) > maxTargetURIBytes || asReceived && strings.Contains(raw, "#") {
		return "", "", errTargetURI
	}
	raw, _, _ = strings.Cut(raw, "#")
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", errTargetURI
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return "", "", errTargetURI
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, err = canonicalAuthority(scheme, rest[:end], asReceived)
	if err != nil {
		return "", "", err
	}
	pathQuery := rest[end:]
	path, query, hasQuery := strings.Cut(pathQuery, "?")
	if path, err = canonicalPath(path); err != nil {
		return "", "", err
	}
	if hasQuery {
		var b strings.Builder
		b.Grow(len(query))
		for i := 0; i < len(query); i++ {
			switch c := query[i]; {
			case c <= ' ' || c == 0x7f:
				return "", "", errTargetURI
			case c >= utf8.RuneSelf: // not URI bytes: encoded as a browser does
				b.WriteByte('%')
				b.WriteByte(upperHex[c>>4])
				b.WriteByte(upperHex[c&15])
			default:
				b.WriteByte(c)
			}
		}
		path += "?" + b.String()
	}
	target = scheme + "://" + authority + path
	if len(target) > maxTargetURIBytes {
		// Percent-encoding can triple a URI's length: a canonical form
		// over the bound would be refused when canonicalized again.
		return "", "", errTargetURI
	}
	return target, authority, nil
}

// canonicalAuthority canonicalizes host[:port], dropping userinfo.
func canonicalAuthority(scheme, a string, asReceived bool) (string, error) {
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		a = a[i+1:]
	}
	var host, port string
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", errTargetURI
		}
		lit := a[1:end]
		addr, err := netip.ParseAddr(lit)
		if err != nil || !addr.Is6() || addr.Zone() != "" || strings.Contains(lit, "%") {
			return "", errTargetURI
		}
		host = "[" + strings.ToLower(lit) + "]"
		switch after := a[end+1:]; {
		case after == "":
		case after[0] == ':':
			port = after[1:]
		default:
			return "", errTargetURI
		}
	} else {
		switch strings.Count(a, ":") {
		case 0:
			host = a
		case 1:
			host, port, _ = strings.Cut(a, ":")
		default:
			return "", errTargetURI // a bare IPv6 literal
		}
		var err error
		if host, err = canonicalHost(host, asReceived); err != nil {
			return "", err
		}
	}
	if port != "" {
		if len(port) > 5 {
			return "", errTargetURI
		}
		n, err := strconv.Atoi(port)
		if err != nil || n <= 0 || n > 65535 || strings.IndexFunc(port, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
			return "", errTargetURI
		}
		if scheme == "https" && n == 443 || scheme == "http" && n == 80 {
			return host, nil
		}
		return host + ":" + strconv.Itoa(n), nil
	}
	return host, nil
}

// canonicalHost lower-cases a registered name, converts U-labels to
// A-labels and drops one trailing root dot.
func canonicalHost(h string, asReceived bool) (string, error) {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", errTargetURI
	}
	labels := strings.Split(h, ".")
	for i, l := range labels {
		if l == "" || len(l) > 63*4 {
			return "", errTargetURI
		}
		if isASCII(l) {
			l = strings.ToLower(l)
			for j := 0; j < len(l); j++ {
				if c := l[j]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
					return "", errTargetURI
				}
			}
			labels[i] = l
			continue
		}
		if asReceived {
			return "", errTargetURI
		}
		a, err := toALabel(l)
		if err != nil {
			return "", err
		}
		labels[i] = a
	}
	out := strings.Join(labels, ".")
	if len(out) > 253 {
		return "", errTargetURI
	}
	return out, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// toALabel converts a U-label to its A-label: Unicode lower case, then
// Punycode (RFC 3492). This is UTS-46 Nontransitional processing for labels
// of letters, digits and hyphens; a label with a code point whose UTS-46
// mapping needs tables this package does not carry (marks, symbols,
// compatibility forms such as full-width letters) is refused rather than
// guessed.
func toALabel(l string) (string, error) {
	if !utf8.ValidString(l) {
		return "", errTargetURI
	}
	var runes []rune
	for _, r := range l {
		r = unicode.ToLower(r)
		switch {
		case r < utf8.RuneSelf:
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return "", errTargetURI
			}
		case !unicode.IsLetter(r) && !unicode.IsDigit(r),
			r >= 0xFF00 && r <= 0xFFEF, // half- and full-width forms map to other code points
			unicode.IsUpper(r) || unicode.IsTitle(r):
			return "", errTargetURI
		}
		runes = append(runes, r)
	}
	enc, err := punycodeEncode(runes)
	if err != nil {
		return "", err
	}
	out := "xn--" + enc
	if len(out) > 63 {
		return "", errTargetURI
	}
	return out, nil
}

// punycodeEncode implements RFC 3492 §6.3.
func punycodeEncode(input []rune) (string, error) {
	const (
		base        = 36
		tmin        = 1
		tmax        = 26
		skew        = 38
		damp        = 700
		initialBias = 72
		initialN    = 128
	)
	adapt := func(delta, numPoints int, first bool) int {
		if first {
			delta /= damp
		} else {
			delta /= 2
		}
		delta += delta / numPoints
		k := 0
		for delta > ((base-tmin)*tmax)/2 {
			delta /= base - tmin
			k += base
		}
		return k + (base-tmin+1)*delta/(delta+skew)
	}
	digit := func(d int) byte {
		if d < 26 {
			return byte('a' + d)
		}
		return byte('0' + d - 26)
	}
	var out []byte
	for _, r := range input {
		if r < initialN {
			out = append(out, byte(r))
		}
	}
	b := len(out)
	h := b
	if b > 0 {
		out = append(out, '-')
	}
	n, delta, bias := initialN, 0, initialBias
	for h < len(input) {
		m := int(unicode.MaxRune) + 1
		for _, r := range input {
			if int(r) >= n && int(r) < m {
				m = int(r)
			}
		}
		if (m-n)*(h+1) > 1<<30 {
			return "", errTargetURI
		}
		delta += (m - n) * (h + 1)
		n = m
		for _, r := range input {
			if int(r) < n {
				delta++
			}
			if int(r) == n {
				q := delta
				for k := base; ; k += base {
					t := k - bias
					if t < tmin {
						t = tmin
					} else if t > tmax {
						t = tmax
					}
					if q < t {
						break
					}
					out = append(out, digit(t+(q-t)%(base-t)))
					q = (q - t) / (base - t)
				}
				out = append(out, digit(q))
				bias = adapt(delta, h+1, h == b)
				delta = 0
				h++
			}
		}
		delta++
		n++
	}
	return string(out), nil
}

// canonicalPath normalizes percent-encodings and removes dot segments.
func canonicalPath(p string) (string, error) {
	if p == "" {
		return "/", nil
	}
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%':
			if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
				return "", errTargetURI
			}
			v := unhex(p[i+1])<<4 | unhex(p[i+2])
			if isUnreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(upperHex[v>>4])
				b.WriteByte(upperHex[v&15])
			}
			i += 2
		case c <= ' ' || c == 0x7f:
			return "", errTargetURI
		case isUnreserved(c) || strings.IndexByte("/!$&'()*+,;=:@", c) >= 0:
			b.WriteByte(c)
		default: // a byte a URI cannot carry raw: encode it the same way on both ends
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		}
	}
	return removeDotSegments(b.String()), nil
}

const upperHex = "0123456789ABCDEF"

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func isUnreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// removeDotSegments is RFC 3986 §5.2.4.
func removeDotSegments(in string) string {
	var out []string // each element is "/" + segment
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			start := 0
			if in[0] == '/' {
				start = 1
			}
			end := strings.IndexByte(in[start:], '/')
			if end < 0 {
				end = len(in)
			} else {
				end += start
			}
			out = append(out, in[:end])
			in = in[end:]
		}
	}
	s := strings.Join(out, "")
	if s == "" || s[0] != '/' {
		s = "/" + s
	}
	return s
}
