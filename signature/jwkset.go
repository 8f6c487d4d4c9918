package signature

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
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
// safe for concurrent use; lookups that need a fetch at once share one.
type JWKSet struct {
	cfg JWKSetConfig
	// fetching is held by the one lookup fetching the set; others wait
	// on it, or on their context.
	fetching chan struct{}

	mu        sync.Mutex
	keys      map[string]JWK
	fetchedAt time.Time // when the keys held were fetched; zero before the first
	triedAt   time.Time // when a fetch was last tried, successful or not
	failed    error     // the last fetch's error, nil once one succeeds
}

// JWKSetConfig configures a [JWKSet].
type JWKSetConfig struct {
	// URL is the set's address: https, or http to a loopback host (a
	// test's server). Required.
	URL string
	// Client fetches the set. Defaults to a client with a 10 s timeout
	// over http.DefaultTransport. The URL is the receiver's own
	// configuration, not the sender's input, so no SSRF guard stands in
	// its way.
	Client *http.Client
	// Refresh is how old a held set may be and still answer; an older one
	// is fetched again first. Defaults to 10 minutes.
	Refresh time.Duration
	// MissInterval is how often a key id the set does not hold, or a
	// failed fetch, may cause a fetch; at most Refresh. Defaults to 1
	// minute.
	MissInterval time.Duration
	// Now is the clock (tests). Defaults to time.Now.
	Now func() time.Time
}

// NewJWKSet returns a JWKSet for cfg; it fetches nothing until its first
// lookup. A URL that is not absolute https (or http to a loopback host),
// a negative duration or a MissInterval longer than Refresh is an error
// matching courier.CodeConfigInvalid.
func NewJWKSet(cfg JWKSetConfig) (*JWKSet, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && (u.Scheme != "http" || !loopbackHost(u.Hostname()))) {
		return nil, configError("JWKSetConfig.URL must be an absolute https URL, or http to a loopback host")
	}
	if cfg.Refresh < 0 || cfg.MissInterval < 0 {
		return nil, configError("JWKSetConfig.Refresh and MissInterval must not be negative")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = 10 * time.Minute
	}
	if cfg.MissInterval == 0 {
		cfg.MissInterval = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MissInterval > cfg.Refresh {
		return nil, configError("JWKSetConfig.MissInterval must not be longer than Refresh")
	}
	return &JWKSet{cfg: cfg, fetching: make(chan struct{}, 1)}, nil
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
// held is missing, older than Refresh, or lacks kid (see [JWKSet]). Its
// signature is that of [RFC9421VerifierConfig].LookupKey.
func (s *JWKSet) LookupKey(ctx context.Context, kid string) (JWK, bool, error) {
	k, found, fetch, err := s.held(kid)
	if !fetch {
		return k, found, err
	}
	select {
	case s.fetching <- struct{}{}:
	case <-ctx.Done():
		return JWK{}, false, ctx.Err()
	}
	defer func() { <-s.fetching }()
	// Another lookup may have fetched while this one waited: ask again
	// before fetching.
	if k, found, fetch, err = s.held(kid); !fetch {
		return k, found, err
	}
	if err := s.fetch(ctx); err != nil {
		return JWK{}, false, err
	}
	k, found = s.lookup(kid)
	return k, found, nil
}

// held answers kid from the set held, or says a fetch is needed first.
func (s *JWKSet) held(kid string) (k JWK, found, fetch bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	k, found = s.keys[kid]
	switch fresh := !s.fetchedAt.IsZero() && now.Sub(s.fetchedAt) < s.cfg.Refresh; {
	case fresh && found:
		return k, true, false, nil
	case s.triedAt.IsZero() || now.Sub(s.triedAt) >= s.cfg.MissInterval:
		return JWK{}, false, true, nil
	case s.failed != nil:
		return JWK{}, false, false, s.failed
	default: // fresh (MissInterval <= Refresh), fetched within MissInterval, without kid
		return JWK{}, false, false, errJWKSetMiss
	}
}

// lookup reads kid from the set held.
func (s *JWKSet) lookup(kid string) (JWK, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[kid]
	return k, ok
}

// fetch gets the set and holds it, or records why it could not.
func (s *JWKSet) fetch(ctx context.Context) error {
	keys, err := s.get(ctx)
	if err != nil && ctx.Err() != nil {
		return err // the lookup's request ended, not the host: no mark against it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.triedAt = s.cfg.Now()
	if err != nil {
		s.failed = err
		return err
	}
	s.keys, s.fetchedAt, s.failed = keys, s.triedAt, nil
	return nil
}

// get fetches and parses the set.
func (s *JWKSet) get(ctx context.Context) (map[string]JWK, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("signature: jwk set: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("signature: jwk set: fetch: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("signature: jwk set: fetch: %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("signature: jwk set: fetch: %w", err)
	}
	list, err := ParseJWKSet(data)
	if err != nil {
		// Not the parser's config_invalid: the sender's set is unreadable
		// for now, infrastructure trouble the receiver answers 503.
		return nil, errors.New("signature: jwk set: fetched: " + err.Error())
	}
	keys := make(map[string]JWK, len(list))
	for _, k := range list {
		keys[k.KeyID()] = k
	}
	return keys, nil
}
