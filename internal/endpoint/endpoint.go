// Package endpoint holds the two ways courier names an endpoint where its
// URL must not appear: Redact, for people (logs, events, the ops page),
// and Ref, for machines (forms, API paths). An endpoint URL may carry a
// credential in its userinfo, its query or its path: chat services' webhook
// URLs are capabilities whose path is the secret
// (https://hooks.example/services/T0/B0/secret); neither form shows any of
// them.
//
// The sender's worker and the admin surface both name endpoints this way;
// keep one home for it so that what a log line says and what the ops page
// shows agree. Normalize is the one form of an endpoint the store keeps,
// whatever spelling of it it was given.
package endpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxSize bounds an endpoint URL, in bytes (store.MaxEndpointSize).
const MaxSize = 2048

// Bounds of an endpoint's limits (store.Limits), which the store enforces
// and the admin checks field by field.
const (
	MaxLimitInFlight = 100_000
	MaxLimitRate     = 1_000_000 // requests per second
	MinLimitRate     = 1e-6      // one a fortnight, about: slower still, the bucket's arithmetic underflows on PostgreSQL
	MaxLimitBurst    = 1_000_000
)

// LimitFault is a field of an endpoint's limits outside its bounds: its
// JSON name (max_in_flight, rate, burst) and the rule it breaks (min,
// max, or excluded_without for a burst without a rate).
type LimitFault struct{ Field, Rule string }

// LimitFaults returns the faults of an endpoint's limits, in field order;
// none if they are within their bounds. Rate is 0 for no limit, or within
// MinLimitRate..MaxLimitRate.
func LimitFaults(maxInFlight int, rate float64, burst int) []LimitFault {
	var faults []LimitFault
	bound := func(field string, low, high bool) {
		switch {
		case low:
			faults = append(faults, LimitFault{field, "min"})
		case high:
			faults = append(faults, LimitFault{field, "max"})
		}
	}
	bound("max_in_flight", maxInFlight < 0, maxInFlight > MaxLimitInFlight)
	bound("rate", rate < 0 || rate > 0 && rate < MinLimitRate || math.IsNaN(rate), rate > MaxLimitRate)
	bound("burst", burst < 0, burst > MaxLimitBurst)
	if rate == 0 && burst != 0 {
		faults = append(faults, LimitFault{"burst", "excluded_without"})
	}
	return faults
}

// Valid reports whether raw is an endpoint a worker can send to: an
// absolute http or https URL with a host, at most MaxSize bytes of UTF-8
// (PostgreSQL stores no other text). Whether the destination is allowed
// is the worker's transport's to say, at dial time. The outbox refuses
// any other; the publish API refuses it first, naming its field. It asks
// nothing of a port: a new endpoint's is Dialable's to judge.
func Valid(raw string) bool {
	if raw == "" || len(raw) > MaxSize || !utf8.ValidString(raw) {
		return false
	}
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Opaque == "" && u.Hostname() != ""
}

// Rule is what Valid asks of an endpoint, as a refusal says it: "…
// endpoint must be " + Rule.
const Rule = "an absolute http or https URL with a host, at most 2048 bytes"

// Dialable reports whether the valid endpoint raw (see Valid) names no
// port, or one a dial can reach: 1 to 65535, written with leading zeros or
// without (:0443 dials port 443). On port 0, or one above 65535, every
// attempt would fail with network_error until its budget ran out.
//
// Valid does not ask it: Valid is what every method names an endpoint by,
// and a database may hold endpoints stored before the port was asked of
// them, which are still named, limited, redriven and published to. It is
// asked where an endpoint enters courier (an enqueue, a subscription
// created or moved, the publish API's caller-chosen endpoint), which
// refuses one that is not Dialable with PortRule.
func Dialable(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	port := u.Port() // digits only, as url.Parse takes a port
	if port == "" {
		return true
	}
	n := 0
	for i := range len(port) {
		if n = n*10 + int(port[i]-'0'); n > 65535 {
			return false
		}
	}
	return n >= 1
}

// PortRule is what Dialable asks of a new endpoint, as a refusal says it:
// "… endpoint must be " + PortRule.
const PortRule = "a URL whose port, if it names one, is 1 to 65535"

// HostAsDialed reports whether the valid endpoint raw (see Valid) names
// its host as a dial resolves it: in ASCII, without a trailing root dot.
// Normalize folds the case of an ASCII host, not its other spellings, and
// the worker sends to them all the same: net/http maps a host of other
// characters to the ASCII name it dials (IDNA: full-width ｅｘａｍｐｌｅ.com,
// or its percent-encoded form, dials example.com; an internationalized
// name dials its A-label, xn--…), and a resolver takes example.com. for
// example.com. Such a spelling would be another endpoint for one
// receiver: another breaker, other limits, a receiver an operator
// disabled sent to again, a URL a publish policy refused allowed.
//
// As Dialable, it is asked where an endpoint enters courier, which
// refuses one that is not HostAsDialed with HostRule, and not of
// endpoints a database holds already.
func HostAsDialed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := u.Hostname() // percent-decoded
	for i := range len(host) {
		if host[i] >= utf8.RuneSelf {
			return false
		}
	}
	return !strings.HasSuffix(host, ".")
}

// HostRule is what HostAsDialed asks of a new endpoint, as a refusal says
// it: "… endpoint must be " + HostRule.
const HostRule = "a URL whose host is ASCII (an internationalized name in its A-label form, xn--…) without a trailing dot"

// Normalize returns the form of the valid endpoint raw (see Valid) that
// courier keeps and names it by: its scheme and host in ASCII lower case
// and without the scheme's default port (443 for https, 80 for http), or
// an empty one, so that https://Example.com:443/hook and
// https://example.com/hook are one endpoint, as they are one receiver. It
// changes nothing else: userinfo, path, query and fragment keep their
// bytes, because the request sent, and what is signed of it, are made from
// them (an RFC 9421 signature normalizes scheme, host and port itself).
// An endpoint that is not valid is returned as it is.
func Normalize(raw string) string {
	if !Valid(raw) {
		return raw
	}
	colon := strings.IndexByte(raw, ':') // Valid: raw is scheme "://" authority …
	scheme := strings.ToLower(raw[:colon])
	rest := raw[colon+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	userinfo, host := "", authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, host = authority[:at+1], authority[at+1:]
	}
	port := ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 && i > strings.LastIndexByte(host, ']') {
		host, port = host[:i], host[i+1:]
	}
	if zone := strings.Index(host, "%25"); zone >= 0 {
		host = lowerASCII(host[:zone]) + host[zone:] // an IPv6 zone is the host's own name for an interface
	} else {
		host = lowerASCII(host)
	}
	if port == "" || scheme == "https" && port == "443" || scheme == "http" && port == "80" {
		return scheme + "://" + userinfo + host + tail
	}
	return scheme + "://" + userinfo + host + ":" + port + tail
}

// lowerASCII maps A-Z to a-z and keeps every other byte.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// RefLen is the length of a Ref: 32 lowercase hex characters (128 bits of
// SHA-256).
const RefLen = 32

// Redact keeps what identifies an endpoint to a person and drops what may
// carry a credential: it returns scheme and host (with port), never
// userinfo, path, query or fragment; a path beyond "/" shows as "/…", so
// that the reader knows one was there. A URL that does not parse is
// "invalid-url". Two endpoints that differ only in what Redact drops (two
// webhooks of one chat service) look the same; tell them apart by Ref,
// which every place that shows Redact's form shows beside it.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "invalid-url"
	}
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	switch u.Path {
	case "":
		return shown
	case "/":
		return shown + "/"
	}
	return shown + "/…"
}

// RedactURLs returns text with every URL in it redacted as Redact does,
// for the text of an error courier did not write (a key store's, a
// proxy's) that may name a URL with a credential in its userinfo, path or
// query. A URL is taken to run from its scheme's "://" to the next space,
// quote or angle bracket (a quote escaped with a backslash, as %q writes
// one, does not end it), less the punctuation that ends it (the colon of
// "url: reason"): the forms *url.Error and most messages give it. A
// credential that is not part of such a URL is not found.
func RedactURLs(text string) string {
	return urlInText.ReplaceAllStringFunc(text, func(u string) string {
		trimmed := strings.TrimRight(u, ".,:;!)")
		return Redact(trimmed) + u[len(trimmed):]
	})
}

// urlInText matches a URL in text, as RedactURLs finds it.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://(?:\\.|[^\s"'<>\\` + "`" + `])*`)

// Ref is an opaque, stable reference to the endpoint raw: the first RefLen
// hex characters of the SHA-256 of its exact bytes, so that whoever knows
// the URL can compute it and it names one endpoint among any realistic
// number (a collision needs about 2^64 endpoints). It is a digest, not a
// secret: a credential with little entropy in the URL could be guessed
// against it offline, like against any digest; credentials in endpoint
// URLs should be random.
func Ref(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])[:RefLen]
}

// IsRef reports whether s has the form of a Ref: RefLen lowercase hex
// characters.
func IsRef(s string) bool {
	if len(s) != RefLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
