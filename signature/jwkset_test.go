package signature_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/signature"
)

// publisher is a sender's jwks_uri: the set it publishes, how it answers,
// and how many times it was fetched.
type publisher struct {
	mu      sync.Mutex
	keys    []signature.JWK
	answer  func(w http.ResponseWriter) bool // when set and true, it has answered instead
	fetches atomic.Int32
	srv     *httptest.Server
}

func newPublisher(t *testing.T, keys ...signature.JWK) *publisher {
	p := &publisher{keys: keys}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fetches.Add(1)
		p.mu.Lock()
		answer, keys := p.answer, p.keys
		p.mu.Unlock()
		if answer != nil && answer(w) {
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		json.NewEncoder(w).Encode(map[string][]signature.JWK{"keys": keys})
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *publisher) publish(keys ...signature.JWK) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = keys
}

func (p *publisher) answerWith(answer func(w http.ResponseWriter) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answer = answer
}

// holdAnswers has p hold every answer until release is called; reached
// is closed when the first request has come.
func (p *publisher) holdAnswers() (reached <-chan struct{}, release func()) {
	came, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p.answerWith(func(http.ResponseWriter) bool {
		once.Do(func() { close(came) })
		<-held
		return false
	})
	return came, func() { close(held) }
}

func publicKey(t *testing.T, kid string) signature.JWK {
	t.Helper()
	k, err := signature.GenerateJWK(kid, signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	return k.Public()
}

func newJWKSet(t *testing.T, p *publisher, c *fakeclock.Clock) *signature.JWKSet {
	t.Helper()
	set, err := signature.NewJWKSet(signature.JWKSetConfig{
		URL: p.srv.URL + "/.well-known/jwks.json", Client: p.srv.Client(),
		Refresh: 10 * time.Minute, MissInterval: time.Minute, Now: c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// lookup asks set for kid and says what it answered: "found", "not
// found", or the error.
func lookup(t *testing.T, set *signature.JWKSet, kid string) string {
	t.Helper()
	k, found, err := set.LookupKey(t.Context(), kid)
	switch {
	case err != nil:
		return "error: " + err.Error()
	case found && k.KeyID() == kid:
		return "found"
	case found:
		return "found " + k.KeyID()
	}
	return "not found"
}

// TestJWKSetFetchesOnlyWhenItMust: the set is fetched at the first
// lookup, not per lookup; a key id it does not hold fetches it again at
// most once per MissInterval (answered an error meanwhile, so the sender
// retries, and not found once a fetch lacks it); a newly published key is
// found at its first use after that; and a withdrawn key stops being
// found once the set is older than Refresh.
func TestJWKSetFetchesOnlyWhenItMust(t *testing.T) {
	t.Parallel()
	a, b := publicKey(t, "a"), publicKey(t, "b")
	p := newPublisher(t, a)
	c := fakeclock.New()
	set := newJWKSet(t, p, c)

	steps := []struct {
		what    string
		before  func()
		kid     string
		want    string // "found", "not found", or a prefix of the error
		fetches int32  // in all, after the step
	}{
		{"first lookup", nil, "a", "found", 1},
		{"again, the set held", nil, "a", "found", 1},
		{"an unknown kid within MissInterval of the fetch", nil, "z", "error: signature: jwk set: the key id is not in the set", 1},
		{"the unknown kid after MissInterval: fetched again", func() { c.Advance(time.Minute) }, "z", "not found", 2},
		{"again within MissInterval: no fetch", nil, "z", "error: signature: jwk set: the key id is not in the set", 2},
		{"b published, used within MissInterval", func() { p.publish(a, b) }, "b", "error: signature: jwk set: the key id is not in the set", 2},
		{"b after MissInterval", func() { c.Advance(time.Minute) }, "b", "found", 3},
		{"a withdrawn, the set still fresh", func() { p.publish(b) }, "a", "found", 3},
		{"a once the set is older than Refresh", func() { c.Advance(10 * time.Minute) }, "a", "not found", 4},
		{"b from the set just fetched", nil, "b", "found", 4},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		got := lookup(t, set, s.kid)
		if !strings.HasPrefix(got, s.want) {
			t.Fatalf("%s: lookup %q = %s, want %s", s.what, s.kid, got, s.want)
		}
		if n := p.fetches.Load(); n != s.fetches {
			t.Fatalf("%s: %d fetches in all, want %d", s.what, n, s.fetches)
		}
	}
}

// TestJWKSetFailsClosedAndSparesAFailingHost: a fetch that fails (an
// answer other than 200, a body that is no JWK Set or over 1 MiB) is the
// lookup's error, never a key from a stale set, and neither a refusal of
// the request nor config_invalid, so a receiver answers 503 and the sender
// retries; the host is not asked again before MissInterval; once it
// answers, the set is fetched.
func TestJWKSetFailsClosedAndSparesAFailingHost(t *testing.T) {
	t.Parallel()
	failures := map[string]func(w http.ResponseWriter) bool{
		"503": func(w http.ResponseWriter) bool { w.WriteHeader(http.StatusServiceUnavailable); return true },
		"not a set": func(w http.ResponseWriter) bool {
			w.Write([]byte(`{"kty":"OKP"}`))
			return true
		},
		"304 to a fetch that held nothing": func(w http.ResponseWriter) bool {
			w.WriteHeader(http.StatusNotModified)
			return true
		},
		"over 1 MiB": func(w http.ResponseWriter) bool {
			w.Write(append([]byte(`{"keys":[],"pad":"`), bytes.Repeat([]byte("x"), 1<<20)...))
			return true
		},
	}
	for name, fail := range failures {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := publicKey(t, "a")
			p := newPublisher(t, a)
			c := fakeclock.New()
			set := newJWKSet(t, p, c)
			if got := lookup(t, set, "a"); got != "found" {
				t.Fatalf("first lookup: %s", got)
			}
			p.answerWith(fail)
			c.Advance(10 * time.Minute) // the set is stale: the next lookup fetches
			if got := lookup(t, set, "a"); !strings.HasPrefix(got, "error: signature: jwk set: fetch") {
				t.Fatalf("lookup while the host fails: %s, want the fetch's error", got)
			}
			_, _, err := set.LookupKey(t.Context(), "a")
			if errors.Is(err, courier.CodeSignatureInvalid) || courier.CodeOf(err) == courier.CodeConfigInvalid {
				t.Fatalf("the fetch's error is %v (%s): a refusal of the request or of the configuration, where the host's trouble is neither", err, courier.CodeOf(err))
			}
			if got := lookup(t, set, "a"); !strings.HasPrefix(got, "error: signature: jwk set: fetch") || p.fetches.Load() != 2 {
				t.Fatalf("lookup again: %s after %d fetches; want the same error, without a fetch (2)", got, p.fetches.Load())
			}
			p.answerWith(nil)
			c.Advance(time.Minute)
			if got := lookup(t, set, "a"); got != "found" || p.fetches.Load() != 3 {
				t.Fatalf("lookup once the host answers: %s after %d fetches; want found after 3", got, p.fetches.Load())
			}
		})
	}
}

// TestJWKSetHonorsASetsMaxAge: a Cache-Control max-age shorter than
// Refresh, less the answer's Age, is how long the set answers before it
// is fetched again, never less than MissInterval (no-cache and no-store
// count as 0); one longer than Refresh, or one that does not parse,
// leaves Refresh.
func TestJWKSetHonorsASetsMaxAge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cacheControl []string
		age          string        // the Age header, if any
		fresh        time.Duration // Refresh 10m, MissInterval 1m
	}{
		{nil, "", 10 * time.Minute},
		{[]string{"max-age=120"}, "", 2 * time.Minute},
		{[]string{"public, Max-Age=300, must-revalidate"}, "", 5 * time.Minute},
		{[]string{"public", "max-age=240"}, "", 4 * time.Minute},
		{[]string{`max-age="180"`}, "", 3 * time.Minute},
		{[]string{"max-age=5"}, "", time.Minute},
		{[]string{"max-age=0"}, "", time.Minute},
		{[]string{"no-cache"}, "", time.Minute},
		{[]string{"no-store, max-age=600"}, "", time.Minute},
		{[]string{"max-age=3600"}, "", 10 * time.Minute},
		{[]string{"max-age=99999999999999999999"}, "", 10 * time.Minute},
		{[]string{"max-age=soon"}, "", 10 * time.Minute},
		{[]string{"max-age=-1"}, "", 10 * time.Minute},
		{[]string{"max-age=300"}, "120", 3 * time.Minute},
		{[]string{"max-age=300"}, "290", time.Minute},
		{[]string{"max-age=300"}, "900", time.Minute},
		{[]string{"max-age=300"}, "soon", 5 * time.Minute},
		{nil, "120", 10 * time.Minute},
	} {
		t.Run(strings.Join(tc.cacheControl, "|")+" age "+tc.age, func(t *testing.T) {
			t.Parallel()
			p := newPublisher(t, publicKey(t, "a"))
			p.answerWith(func(w http.ResponseWriter) bool {
				for _, v := range tc.cacheControl {
					w.Header().Add("Cache-Control", v)
				}
				if tc.age != "" {
					w.Header().Set("Age", tc.age)
				}
				return false
			})
			c := fakeclock.New()
			set := newJWKSet(t, p, c)
			lookup(t, set, "a")
			c.Advance(tc.fresh - time.Second)
			if got := lookup(t, set, "a"); got != "found" || p.fetches.Load() != 1 {
				t.Fatalf("a second short of %v: %s after %d fetches, want found from the set held (1)", tc.fresh, got, p.fetches.Load())
			}
			c.Advance(time.Second)
			if got := lookup(t, set, "a"); got != "found" || p.fetches.Load() != 2 {
				t.Fatalf("at %v: %s after %d fetches, want found after fetching again (2)", tc.fresh, got, p.fetches.Load())
			}
		})
	}
}

// TestJWKSetFetchesAgainConditionally: a fetch after the first sends the
// ETag and Last-Modified of the answer that gave the keys held; a 304
// keeps those keys, fresh for another Refresh, and a changed set is
// answered in full and replaces them.
func TestJWKSetFetchesAgainConditionally(t *testing.T) {
	t.Parallel()
	a, b := publicKey(t, "a"), publicKey(t, "b")
	var mu sync.Mutex
	version, keys := 1, []signature.JWK{a}
	var asked []string // each fetch's If-None-Match and If-Modified-Since, and its answer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		etag := `"v` + strconv.Itoa(version) + `"`
		answer := "200"
		if r.Header.Get("If-None-Match") == etag {
			answer = "304"
		}
		asked = append(asked, r.Header.Get("If-None-Match")+" "+r.Header.Get("If-Modified-Since")+" "+answer)
		w.Header().Set("ETag", etag)
		w.Header().Set("Last-Modified", "Mon, 07 Dec 2026 16:0"+strconv.Itoa(version)+":00 GMT")
		if answer == "304" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		json.NewEncoder(w).Encode(map[string][]signature.JWK{"keys": keys})
	}))
	t.Cleanup(srv.Close)
	c := fakeclock.New()
	set, err := signature.NewJWKSet(signature.JWKSetConfig{URL: srv.URL, Client: srv.Client(), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}

	if got := lookup(t, set, "a"); got != "found" {
		t.Fatalf("first lookup: %s", got)
	}
	c.Advance(10 * time.Minute)
	if got := lookup(t, set, "a"); got != "found" {
		t.Fatalf("lookup answered by a 304: %s, want found from the keys held", got)
	}
	c.Advance(10*time.Minute - time.Second)
	if got := lookup(t, set, "a"); got != "found" {
		t.Fatalf("lookup within Refresh of the 304: %s", got)
	}
	mu.Lock()
	version, keys = 2, []signature.JWK{b}
	mu.Unlock()
	c.Advance(time.Second)
	if got := lookup(t, set, "a"); got != "not found" {
		t.Fatalf("a, withdrawn from the changed set: %s", got)
	}
	if got := lookup(t, set, "b"); got != "found" {
		t.Fatalf("b, published in the changed set: %s", got)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []string{
		"  200",
		`"v1" Mon, 07 Dec 2026 16:01:00 GMT 304`,
		`"v1" Mon, 07 Dec 2026 16:01:00 GMT 200`,
	}
	if !slices.Equal(asked, want) {
		t.Errorf("fetches (If-None-Match If-Modified-Since answer):\n%s\nwant\n%s", strings.Join(asked, "\n"), strings.Join(want, "\n"))
	}
}

// TestJWKSetA304KeepsWhatItDoesNotRestate: a 304 replaces what the held
// answer said of caching only where it says it again, as HTTP caches do
// (RFC 9111, section 4.3.4): one without a Cache-Control leaves the held
// answer's max-age, and one with an ETag alone (as net/http's
// ServeContent answers) leaves its Last-Modified to send back.
func TestJWKSetA304KeepsWhatItDoesNotRestate(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string // each fetch's If-None-Match and If-Modified-Since
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("If-None-Match")+" "+r.Header.Get("If-Modified-Since"))
		mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Last-Modified", "Mon, 07 Dec 2026 16:01:00 GMT")
		w.Header().Set("Cache-Control", "max-age=120")
		json.NewEncoder(w).Encode(map[string][]signature.JWK{"keys": {publicKey(t, "a")}})
	}))
	t.Cleanup(srv.Close)
	c := fakeclock.New()
	set, err := signature.NewJWKSet(signature.JWKSetConfig{URL: srv.URL, Client: srv.Client(), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	fetches := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(asked)
	}
	lookup(t, set, "a")
	for i := 2; i <= 3; i++ {
		c.Advance(2*time.Minute - time.Second)
		if got := lookup(t, set, "a"); got != "found" || fetches() != i-1 {
			t.Fatalf("a second short of the max-age: %s after %d fetches, want found from the set held (%d)", got, fetches(), i-1)
		}
		c.Advance(time.Second)
		if got := lookup(t, set, "a"); got != "found" || fetches() != i {
			t.Fatalf("at the max-age: %s after %d fetches, want found after a 304 (%d)", got, fetches(), i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{" ", `"v1" Mon, 07 Dec 2026 16:01:00 GMT`, `"v1" Mon, 07 Dec 2026 16:01:00 GMT`}
	if !slices.Equal(asked, want) {
		t.Errorf("fetches (If-None-Match If-Modified-Since):\n%s\nwant\n%s", strings.Join(asked, "\n"), strings.Join(want, "\n"))
	}
}

// TestJWKSetLookupsShareAFetch: lookups at once on a set not yet fetched
// make one fetch between them, and all find the key.
func TestJWKSetLookupsShareAFetch(t *testing.T) {
	t.Parallel()
	p := newPublisher(t, publicKey(t, "a"))
	reached, release := p.holdAnswers()
	set := newJWKSet(t, p, fakeclock.New())
	const n = 16
	answers := make(chan string, n)
	for range n {
		go func() { answers <- lookup(t, set, "a") }()
	}
	<-reached // a fetch is under way; the lookups that come meanwhile wait for it
	release()
	for range n {
		if got := <-answers; got != "found" {
			t.Errorf("a lookup: %s, want found", got)
		}
	}
	if got := p.fetches.Load(); got != 1 {
		t.Errorf("%d fetches, want 1 shared by every lookup", got)
	}
}

// TestJWKSetEndedLookupsShareTheirFetch: a lookup whose request ends
// during the fetch returns its context's error, and the fetch goes on:
// the lookups after it are answered from it, a made-up key id within
// MissInterval too, with no fetch of their own, so requests that hang up
// cannot make the set be fetched per request.
func TestJWKSetEndedLookupsShareTheirFetch(t *testing.T) {
	t.Parallel()
	p := newPublisher(t, publicKey(t, "a"))
	reached, release := p.holdAnswers()
	set := newJWKSet(t, p, fakeclock.New())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, _, err := set.LookupKey(ctx, "made-up-1"); done <- err }()
	<-reached
	cancel() // the client hangs up while the set is fetched
	err := <-done
	release()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the ended lookup: %v, want context.Canceled", err)
	}
	if got := lookup(t, set, "a"); got != "found" {
		t.Fatalf("the next lookup: %s, want found", got)
	}
	if got := lookup(t, set, "made-up-2"); !strings.HasPrefix(got, "error: signature: jwk set: the key id is not in the set") {
		t.Fatalf("a made-up key id within MissInterval: %s, want the miss error", got)
	}
	if n := p.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want the ended lookup's alone", n)
	}
}

// roundTrip is an http.RoundTripper of a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestJWKSetRefusesARedirectToPlainHTTP: a set is not taken from plain
// http, where anyone on the path could put keys of their own in it,
// however the jwks_uri redirects there: a Client of the application's own
// follows the redirect, and the answer is refused; the default one does
// not send the request.
func TestJWKSetRefusesARedirectToPlainHTTP(t *testing.T) {
	t.Parallel()
	published, err := json.Marshal(map[string][]signature.JWK{"keys": {publicKey(t, "a")}})
	if err != nil {
		t.Fatal(err)
	}
	var plain atomic.Int32
	client := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		if r.URL.Scheme == "https" {
			return &http.Response{StatusCode: http.StatusFound, Status: "302 Found", Request: r,
				Header: http.Header{"Location": {"http://agent.example/jwks.json"}}, Body: http.NoBody}, nil
		}
		plain.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Request: r,
			Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(published))}, nil
	})}
	set, err := signature.NewJWKSet(signature.JWKSetConfig{URL: "https://agent.example/jwks.json", Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, set, "a"); !strings.Contains(got, "not https") || plain.Load() != 1 {
		t.Errorf("an application's Client, redirected to http: %s after %d plain requests; want refused after the one", got, plain.Load())
	}

	redirect := httptest.NewServer(http.RedirectHandler("http://agent.example/jwks.json", http.StatusFound))
	t.Cleanup(redirect.Close)
	set, err = signature.NewJWKSet(signature.JWKSetConfig{URL: redirect.URL + "/jwks.json"})
	if err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, set, "a"); !strings.Contains(got, "redirected to http://agent.example/…, not https") {
		t.Errorf("the default Client, redirected to http: %s; want the redirect refused", got)
	}
}

// TestJWKSetConfigRefusals: a URL a receiver should not trust a key set
// from, or intervals that cannot both hold, are config_invalid.
func TestJWKSetConfigRefusals(t *testing.T) {
	t.Parallel()
	for _, cfg := range []signature.JWKSetConfig{
		{},
		{URL: "/.well-known/jwks.json"},
		{URL: "http://agent.example/.well-known/jwks.json"},
		{URL: "ftp://agent.example/jwks.json"},
		{URL: "https://agent.example/jwks.json", Refresh: -time.Second},
		{URL: "https://agent.example/jwks.json", Refresh: time.Minute, MissInterval: 2 * time.Minute},
	} {
		if _, err := signature.NewJWKSet(cfg); courier.CodeOf(err) != courier.CodeConfigInvalid {
			t.Errorf("NewJWKSet(%+v) = %v, want %s", cfg, err, courier.CodeConfigInvalid)
		}
	}
	for _, cfg := range []signature.JWKSetConfig{
		{URL: "https://agent.example/jwks.json"},
		{URL: "http://127.0.0.1:8080/jwks.json"},
		{URL: "http://localhost/jwks.json"},
		{URL: "http://[::1]/jwks.json"},
		{URL: "https://agent.example/jwks.json", Refresh: 30 * time.Second}, // MissInterval's default follows it down
	} {
		if _, err := signature.NewJWKSet(cfg); err != nil {
			t.Errorf("NewJWKSet(%+v) = %v, want a set", cfg, err)
		}
	}
}

// TestJWKSetTransportPanicIsAFailedFetch: the fetch runs on a goroutine
// of its own, where a panic of the Client's transport would end the
// process; it is the fetch's failure instead, answered to the lookup,
// naming the panic's type.
func TestJWKSetTransportPanicIsAFailedFetch(t *testing.T) {
	t.Parallel()
	client := &http.Client{Transport: roundTrip(func(*http.Request) (*http.Response, error) { panic("transport bug") })}
	set, err := signature.NewJWKSet(signature.JWKSetConfig{URL: "https://agent.example/jwks.json", Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, set, "a"); !strings.Contains(got, "fetch panicked") || !strings.Contains(got, "string") {
		t.Errorf("lookup over a panicking transport: %s, want the panic, by its type, as the fetch's error", got)
	}
}

// TestJWKSetTransportPanicValueIsNotShown: a panic's value may quote the
// request's URL, credentials and all (a *url.Error, a message formatted
// with it), and the fetch's error reaches the receiver's log: the error
// names the panic's type, never its value.
func TestJWKSetTransportPanicValueIsNotShown(t *testing.T) {
	t.Parallel()
	const setURL = "https://agent:hunter2@agent.example/jwks.json?token=s3cret"
	for _, tc := range []struct {
		name string
		v    any
		typ  string
	}{
		{"a string", "cannot dial " + setURL, "string"},
		{"an error", &url.Error{Op: "Get", URL: setURL, Err: errors.New("transport bug")}, "*url.Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := &http.Client{Transport: roundTrip(func(*http.Request) (*http.Response, error) { panic(tc.v) })}
			set, err := signature.NewJWKSet(signature.JWKSetConfig{URL: setURL, Client: client})
			if err != nil {
				t.Fatal(err)
			}
			got := lookup(t, set, "a")
			if !strings.Contains(got, "fetch panicked") || !strings.Contains(got, tc.typ) {
				t.Errorf("lookup over a transport panicking with %s: %s, want the panic's type, %s", tc.name, got, tc.typ)
			}
			for _, secret := range []string{"hunter2", "s3cret", "transport bug"} {
				if strings.Contains(got, secret) {
					t.Errorf("lookup over a transport panicking with %s: %s, shows the panic's value (%s)", tc.name, got, secret)
				}
			}
		})
	}
}
