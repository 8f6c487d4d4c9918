package signature

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/recovered"
)

// JWKSet is a sender's published JWK Set (its jwks_uri), fetched over
// HTTP and held, for a receiver's [RFC9421VerifierConfig].LookupKey: pass
// its LookupKey method. It fetches the set at the first lookup, and again
// when the set it holds is older than Refresh, so that a key the sender
// withdrew stops verifying within Refresh; and when a request names a key
// the set does not hold, at most once per MissInterval, so that a key the
// sender has just published verifies as soon as it is used, while made-up
// key ids cannot make the receiver fetch per request.
//
// A set's answer may say it goes stale sooner: a Cache-Control max-age
// shorter than Refresh (less the Age a cache in between gave the answer;
// no-cache and no-store count as 0) is how long it answers before it is
// fetched again, never less than MissInterval. A
// max-age longer than Refresh changes nothing. Fetches after the first
// are conditional when the answer had an ETag or a Last-Modified: a 304
// keeps the keys held and counts as a successful fetch, and what it says
// of caching replaces what the held answer said, header by header (one
// without a Cache-Control leaves the held answer's max-age).
//
// It fails closed: a lookup that needs a fetch which fails (the host
// down, an answer other than 200, a body that is not a JWK Set of at
// most 1 MiB) returns the error, which the verifier returns as is and a
// courier receiver answers 503, so the sender retries on its own
// schedule; the next fetch is tried once MissInterval has passed. A key
// id the set does not name, asked again within MissInterval of the last
// fetch, is such an error too (the key may be published meanwhile); once
// a fetch has not found it, it is not found (401
// webhook_signature_key_unknown, which a sender does not retry).
//
// Build one with [NewJWKSet]; the zero value is not usable. A JWKSet is
// safe for concurrent use. Lookups that need a fetch at once share one,
// and wait for it no longer than their context: a request that ends
// stops waiting, while its fetch goes on and counts as one, so requests
// that hang up cannot make it fetch more often.
type JWKSet struct {
	cfg JWKSetConfig

	mu        sync.Mutex
	keys      map[string]JWK
	cache     setCaching    // what the answer that gave the keys held said of caching them
	fetchedAt time.Time     // when the keys held were fetched; zero before the first
	triedAt   time.Time     // when a fetch last ended, successful or not
	failed    error         // the last fetch's error, nil once one succeeds
	inflight  chan struct{} // closed when the fetch under way ends; nil when none is
}

// JWKSetConfig configures a [JWKSet].
type JWKSetConfig struct {
	// URL is the set's address: https, or http to a loopback host (a
	// test's server). Required. It may carry a credential (userinfo, a
	// token in its query): a failed fetch's error, which the receiver
	// logs, names the set, and a redirect's target, by scheme and host
	// only.
	URL string
	// Client fetches the set. Defaults to a client with a 10 s timeout
	// over http.DefaultTransport that follows a redirect only to an https
	// URL (or http to a loopback host). Whatever the Client, a set whose answer came from
	// another URL (a redirect to plain http) is refused, and a fetch
	// takes at most 30 s. The URL is the receiver's own configuration,
	// not the sender's input, so no SSRF guard stands in its way.
	Client *http.Client
	// Refresh is how old a held set may be and still answer; an older one
	// is fetched again first. A shorter Cache-Control max-age of the set's
	// answer shortens it (see [JWKSet]). Defaults to 10 minutes.
	Refresh time.Duration
	// MissInterval is how often a key id the set does not hold, or a
	// failed fetch, may cause a fetch; at most Refresh. Defaults to 1
	// minute, or Refresh if that is shorter.
	MissInterval time.Duration
	// Now is the clock (tests). Defaults to time.Now.
	Now func() time.Time
}

// NewJWKSet returns a JWKSet for cfg; it fetches nothing until its first
// lookup. A URL that is not absolute https (or http to a loopback host),
// a negative duration or a MissInterval longer than Refresh is an error
// matching courier.CodeConfigInvalid.
func NewJWKSet(cfg JWKSetConfig) (*JWKSet, error) {
	if u, err := url.Parse(cfg.URL); err != nil || !trustedSetURL(u) {
		return nil, configError("JWKSetConfig.URL must be an absolute https URL, or http to a loopback host")
	}
	if cfg.Refresh < 0 || cfg.MissInterval < 0 {
		return nil, configError("JWKSetConfig.Refresh and MissInterval must not be negative")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second, CheckRedirect: refuseUntrustedRedirect}
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = 10 * time.Minute
	}
	if cfg.MissInterval == 0 {
		cfg.MissInterval = min(time.Minute, cfg.Refresh)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MissInterval > cfg.Refresh {
		return nil, configError("JWKSetConfig.MissInterval must not be longer than Refresh")
	}
	return &JWKSet{cfg: cfg}, nil
}

// trustedSetURL reports whether a set may be fetched from u: an absolute
// https URL, or http to a loopback host.
func trustedSetURL(u *url.URL) bool {
	return u.Host != "" && (u.Scheme == "https" || u.Scheme == "http" && loopbackHost(u.Hostname()))
}

// refuseUntrustedRedirect is the default Client's CheckRedirect: it
// follows a redirect to a URL a set may be fetched from, as the default
// policy does (at most 10), and no other.
func refuseUntrustedRedirect(req *http.Request, via []*http.Request) error {
	switch {
	case !trustedSetURL(req.URL):
		return fmt.Errorf("redirected to %s, not https", endpoint.Redact(req.URL.String()))
	case len(via) >= 10:
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errJWKSetMiss is a key id the set did not hold at a fetch too recent
// to be tried again.
var errJWKSetMiss = errors.New("signature: jwk set: the key id is not in the set, fetched too recently to fetch again")

// LookupKey finds the key kid in the set, fetching it first when the set
// held is missing, stale (older than Refresh, or than the shorter max-age
// its answer gave), or lacks kid (see [JWKSet]). Its signature is that of
// [RFC9421VerifierConfig].LookupKey.
//
// The fetch runs apart from the lookup that needs it, with the lookup's
// context values but not its end, for at most 30 s: a lookup whose
// request ends stops waiting, and the fetch goes on, is recorded and
// answers the lookups waiting for it. So a request that hangs up cannot
// make the set be fetched again before MissInterval.
func (s *JWKSet) LookupKey(ctx context.Context, kid string) (JWK, bool, error) {
	s.mu.Lock()
	k, found, fetch, err := s.held(kid)
	if !fetch {
		s.mu.Unlock()
		return k, found, err
	}
	done := s.inflight
	if done == nil {
		done = make(chan struct{})
		s.inflight = done
		go s.fetch(context.WithoutCancel(ctx), done)
	}
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return JWK{}, false, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return JWK{}, false, s.failed
	}
	k, found = s.keys[kid]
	return k, found, nil // not found by a fetch made since the request came: it is not published
}

// held answers kid from the set held, or says a fetch is needed first. It
// runs under s.mu.
func (s *JWKSet) held(kid string) (k JWK, found, fetch bool, err error) {
	now := s.cfg.Now()
	k, found = s.keys[kid]
	switch fresh := !s.fetchedAt.IsZero() && now.Sub(s.fetchedAt) < s.cache.fresh; {
	case fresh && found:
		return k, true, false, nil
	case s.inflight != nil, s.triedAt.IsZero(), now.Sub(s.triedAt) >= s.cfg.MissInterval:
		return JWK{}, false, true, nil // a fetch under way is waited for, whatever its cause
	case s.failed != nil:
		return JWK{}, false, false, s.failed
	default: // fresh (MissInterval <= Refresh), fetched within MissInterval, without kid
		return JWK{}, false, false, errJWKSetMiss
	}
}

// fetchBound bounds a fetch, whatever the Client's Timeout.
const fetchBound = 30 * time.Second

// fetch gets the set and holds it, or records why it could not, then
// closes done. A panic of the Client's transport is recorded as its
// failure: the fetch runs on a goroutine of its own, which a panic would
// take the process down with. The failure names the panic's type, not
// its value: a value may quote the request's URL, credentials and all,
// and the failure is the lookup's error, which receivers log.
func (s *JWKSet) fetch(ctx context.Context, done chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, fetchBound)
	defer cancel()
	s.mu.Lock()
	cache := s.cache
	s.mu.Unlock()
	var keys map[string]JWK
	var err error
	if v, _, panicked := recovered.Run(func() { keys, cache, err = s.get(ctx, cache) }); panicked {
		keys, err = nil, fmt.Errorf("signature: jwk set: fetch panicked with a %T (its value not shown: it may hold a credential)", v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.triedAt = s.cfg.Now()
	switch {
	case err != nil:
		s.failed = err
	case keys == nil: // not modified: the keys held are the set's still
		s.cache, s.fetchedAt, s.failed = cache, s.triedAt, nil
	default:
		s.keys, s.cache, s.fetchedAt, s.failed = keys, cache, s.triedAt, nil
	}
	s.inflight = nil
	close(done)
}

// setCaching is what an answer of the set's host said of caching it.
type setCaching struct {
	etag, lastModified string        // the validators a later fetch sends back
	fresh              time.Duration // how long the set answers before it is fetched again
}

// get fetches and parses the set, conditionally when held has
// validators. It returns the keys and what the answer said of caching
// them, or nil keys when the host answered that the set held is still
// its set (304 Not Modified).
func (s *JWKSet) get(ctx context.Context, held setCaching) (map[string]JWK, setCaching, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, held, fmt.Errorf("signature: jwk set: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	if held.etag != "" {
		req.Header.Set("If-None-Match", held.etag)
	}
	if held.lastModified != "" {
		req.Header.Set("If-Modified-Since", held.lastModified)
	}
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		// The *url.Error names the set's URL, which may hold a credential
		// (userinfo, an access token in its query, a capability path): the
		// error is logged by the receiver that answers 503, so it names
		// the set as courier names an endpoint, by scheme and host.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = endpoint.Redact(ue.URL)
		}
		return nil, held, fmt.Errorf("signature: jwk set: fetch: %w", err)
	}
	defer resp.Body.Close()
	if !trustedSetURL(resp.Request.URL) {
		// Redirected to plain http: a Client of the application's own
		// follows it; the default one refuses before it is sent.
		return nil, held, fmt.Errorf("signature: jwk set: fetch: redirected to %s, not https", endpoint.Redact(resp.Request.URL.String()))
	}
	cc := resp.Header.Values("Cache-Control")
	caching := setCaching{
		etag:         resp.Header.Get("ETag"),
		lastModified: resp.Header.Get("Last-Modified"),
		fresh:        s.freshFor(cc, resp.Header.Get("Age")),
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && (held.etag != "" || held.lastModified != ""):
		// What the 304 does not say again, the held answer's says still
		// (RFC 9111, section 4.3.4).
		if caching.etag == "" {
			caching.etag = held.etag
		}
		if caching.lastModified == "" {
			caching.lastModified = held.lastModified
		}
		if len(cc) == 0 {
			caching.fresh = held.fresh
		}
		return nil, caching, nil
	case resp.StatusCode != http.StatusOK:
		return nil, held, fmt.Errorf("signature: jwk set: fetch: %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSetBytes+1))
	if err != nil {
		return nil, held, fmt.Errorf("signature: jwk set: fetch: %w", err)
	}
	list, err := ParseJWKSet(data)
	if err != nil {
		// Not the parser's config_invalid: the sender's set is unreadable
		// for now, infrastructure trouble the receiver answers 503.
		return nil, held, errors.New("signature: jwk set: fetched: " + err.Error())
	}
	keys := make(map[string]JWK, len(list))
	for _, k := range list {
		keys[k.KeyID()] = k
	}
	return keys, caching, nil
}

// freshFor is how long a set whose answer had the Cache-Control header
// lines cc and the Age header age answers before it is fetched again:
// Refresh, or what is left of the answer's max-age when shorter (its
// max-age less the Age a cache in between gave it; no-cache and no-store
// count as 0), but never less than MissInterval. A directive or an Age
// that does not parse is ignored.
func (s *JWKSet) freshFor(cc []string, age string) time.Duration {
	fresh := s.cfg.Refresh
	for _, line := range cc {
		for d := range strings.SplitSeq(line, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-cache", "no-store":
				fresh = 0
			case "max-age":
				if n, ok := seconds(strings.Trim(value, `"`)); ok {
					aged, _ := seconds(age)
					fresh = min(fresh, max(n-aged, 0))
				}
			}
		}
	}
	return max(fresh, s.cfg.MissInterval)
}

// seconds reads a delta-seconds value (RFC 9111): digits, capped where a
// Duration ends.
func seconds(v string) (time.Duration, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second, true
}
