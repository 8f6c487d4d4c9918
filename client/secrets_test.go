package client_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/tablerows"
	"github.com/courier-go/courier/internal/testserver"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// lockedBuffer is a log sink shared by both ends.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNoSecretsInLogsOrAttempts runs deliveries with debug logging on both
// ends, through faults, a receiver holding the wrong key (401s) and the
// refusal of a forbidden destination, and then looks for the secret in
// every form in the logs, the errors reported, the attempts log and the
// attributes of the spans both ends trace.
func TestNoSecretsInLogsOrAttempts(t *testing.T) {
	t.Parallel()
	secret := signature.NewStandardWebhooksSecret()
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	forms := []string{secret, strings.TrimPrefix(secret, "whsec_"), string(raw), hex.EncodeToString(raw),
		base64.RawURLEncoding.EncodeToString(raw), fmt.Sprintf("%x", raw), fmt.Sprint(raw)}

	logs := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	key, err := signature.ParseStandardWebhooksKey("k1", secret)
	if err != nil {
		t.Fatal(err)
	}
	wrong, _ := signature.ParseStandardWebhooksKey("k0", signature.NewStandardWebhooksSecret())
	signer, _ := signature.NewStandardWebhooksSigner(key)

	var servers []*testserver.Server
	for i, k := range []signature.StandardWebhooksKey{key, wrong} {
		rs, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), fmt.Sprintf("receiver-%d.db", i)), store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "s", Keys: []signature.StandardWebhooksKey{k}})
		srv, err := testserver.New(testserver.Config{Store: rs, Verifier: verifier, Logger: logger,
			Script: couriertest.SeededScript(1, couriertest.ScriptSpec{FirstAttempt503: true, DropAfterCommit: 0.3})})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		servers = append(servers, srv)
	}
	rec := &tracingtest.Recorder{}
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sender.db"), store.Config{
		Breaker: store.BreakerConfig{Threshold: 1000}, // every attempt goes out
		Tracer:  rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var events []client.Event
	var mu sync.Mutex
	w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Logger: logger, Transport: loopbackGuards(t, servers).Transport(),
		Backoff: client.ExponentialBackoff(time.Millisecond, time.Millisecond, 0),
		Hook:    func(e client.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := s.DB().BeginTxx(t.Context(), nil)
	for i := range 20 {
		n, payload := terminalNotification(t, i)
		endpoint := servers[i%2].URL + "/terminal"
		if i == 19 {
			endpoint = "https://10.1.2.3/terminal?token=" + secret // refused, with the secret in the URL
		}
		if _, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: n.NotificationID, Endpoint: endpoint, Payload: payload, Profile: ack.ProfileTerminal}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 10; round++ { // each round: one claim of what is due
		if _, err := w.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	var attempts []string
	if err := s.DB().Select(&attempts, "SELECT owner || '|' || outcome || '|' || COALESCE(error_code, '') || '|' || COALESCE(http_status, '') FROM courier_attempts"); err != nil {
		t.Fatal(err)
	}
	var codes []string
	if err := s.DB().Select(&codes, "SELECT COALESCE(last_error_code, '') || '|' || COALESCE(ack_sha256, '') FROM courier_outbox"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	reported := fmt.Sprintf("%+v", events)
	for _, e := range events { // each Event names its endpoint by its ref, which the redacted form cannot
		if e.Endpoint == "https://10.1.2.3/…" && e.EndpointRef != endpoint.Ref("https://10.1.2.3/terminal?token="+secret) {
			t.Errorf("the refused endpoint's Event has ref %q", e.EndpointRef)
		} else if e.Endpoint != "https://10.1.2.3/…" && !slices.Contains([]string{endpoint.Ref(servers[0].URL + "/terminal"), endpoint.Ref(servers[1].URL + "/terminal")}, e.EndpointRef) {
			t.Errorf("Event %+v: its ref is none of the endpoints'", e)
		}
	}
	mu.Unlock()
	var spans []string
	for _, sp := range rec.Spans() {
		spans = append(spans, fmt.Sprint(sp.Name, sp.Failed, sp.Attrs()))
	}
	haystacks := map[string]string{"logs": logs.String(), "attempts": strings.Join(attempts, "\n"), "outbox codes": strings.Join(codes, "\n"),
		"events": reported, "spans": strings.Join(spans, "\n")}
	if len(attempts) < 20 || !strings.Contains(logs.String(), "worker: attempt settled") || !strings.Contains(haystacks["attempts"], "signature_rejected") || !strings.Contains(haystacks["attempts"], "destination_forbidden") ||
		!strings.Contains(haystacks["spans"], "https://10.1.2.3/…") {
		t.Fatalf("the run did not exercise what it should: %d attempts\n%s", len(attempts), haystacks["attempts"])
	}
	if bad := logkey.UndocumentedJSON(logs.String()); len(bad) != 0 {
		t.Errorf("both ends logged keys %v, which courier's documentation does not list", bad)
	}
	for name, hay := range haystacks {
		for _, form := range forms {
			if strings.Contains(hay, form) {
				t.Fatalf("%s contain the secret (as %q)", name, form)
			}
		}
	}
}

// loopbackGuards opens the guard for each test server.
func loopbackGuards(t *testing.T, servers []*testserver.Server) client.Guard {
	var g client.Guard
	for _, s := range servers {
		one := loopbackGuard(t, s.URL)
		g.AllowHTTP = true
		g.AllowPorts = append(g.AllowPorts, one.AllowPorts...)
		g.AllowPrefixes = append(g.AllowPrefixes, one.AllowPrefixes...)
	}
	return g
}

func terminalNotification(t *testing.T, i int) (ack.Terminal, []byte) {
	t.Helper()
	n, err := ack.NewTerminal(ack.Terminal{
		EventID: fmt.Sprintf("evt-%d", i), SiteID: "site", PlanID: "plan", WebsiteVersion: "v1",
		SourceSequence: json.Number(strconv.Itoa(i + 1)), JobCount: "1", ChangeSHA256: ack.Digest([]byte("c")),
		LifecycleBindingSHA256: ack.Digest([]byte("b")), TerminalStatus: "superseded",
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return n, p
}

// TestClassifyHearsNoEndpointSecret: the error Config.Classify hears for a
// request that got no answer names the endpoint as the logs do, without
// its userinfo, path or query: a chat service's webhook URL is a
// credential, and a Classify that logs its error (as one would) must not
// write it out. What the error says of the failure stays.
func TestClassifyHearsNoEndpointSecret(t *testing.T) {
	t.Parallel()
	const secret = "Zk3Qp9xW2sR7"
	for _, tc := range []struct {
		name, endpoint string // "" is the receiver's, under a secret path and query
		cause          error  // what the error must still wrap
	}{
		{"the receiver resets the connection", "", syscall.ECONNRESET},
		{"the guard refuses the destination", "https://alice:" + secret + "@10.1.2.3/services/" + secret + "?token=" + secret, courier.CodeDestinationForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			heard := make(chan error, 1)
			b := rawBundle(t, func(c net.Conn, r *http.Request, body []byte) {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}, func(c *client.Config) {
				c.Classify = func(resp *http.Response, err error) client.Verdict {
					heard <- err
					return client.DefaultClassify(resp, err)
				}
			})
			target := tc.endpoint
			if target == "" {
				target = strings.Replace(b.server.URL, "http://", "http://alice:"+secret+"@", 1) + "/services/" + secret + "?token=" + secret
			}
			tx, err := b.store.DB().BeginTxx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := b.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: target, Payload: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			b.work(t)
			err = <-heard
			if err == nil {
				t.Fatal("Classify heard no error")
			}
			if msg := fmt.Sprintf("%v %+v %#v", err, err, err); strings.Contains(msg, secret) || strings.Contains(msg, "alice") {
				t.Errorf("Classify heard %q: it holds the endpoint's credentials", err)
			}
			var ue *url.Error
			if !errors.Is(err, tc.cause) || !errors.As(err, &ue) || ue.Op != "Post" || !strings.Contains(ue.URL, "10.1.2.3") && !strings.Contains(ue.URL, "127.0.0.1") {
				t.Errorf("Classify heard %q (%T), which no longer says what failed where (%v)", err, err, tc.cause)
			}
		})
	}
}

// TestCallbackErrorsAreLoggedWithTheirURLsRedacted: the error of a
// Transport of the user's own, of SignerFor or of a Signer may name a URL
// with a credential (a key store's *url.Error, a proxy's error naming the
// proxy with its password). The worker's log line gives it with the URL
// cut to scheme and host, as it names the endpoint; the Hook's Event, the
// attempts log and the delivery hold codes alone. A SignerFor's or
// Signer's error was logged as written, and a custom Transport's socket or
// DNS error named whatever its text held.
func TestCallbackErrorsAreLoggedWithTheirURLsRedacted(t *testing.T) {
	t.Parallel()
	const named = "https://user:s3cret@host/?token=t0k"
	errs := map[string]struct {
		err error
		// Whether the line of a Transport's error names the URL: a
		// socket or DNS error is the cause it logs, and a *url.Error
		// or a plain message no cause at all (see networkCause).
		transportNames bool
	}{
		"a message naming it": {fmt.Errorf("upstream %s refused", named), false},
		"a *url.Error":        {&url.Error{Op: "Get", URL: named, Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, false},
		"a *net.OpError":      {&net.OpError{Op: "proxyconnect", Net: "tcp", Err: fmt.Errorf("%s: refused", named)}, true},
		"a *net.DNSError":     {&net.DNSError{Err: "no such host", Name: "host", Server: named}, true},
	}
	callbacks := map[string]func(c *client.Config, err error){
		"Transport": func(c *client.Config, err error) {
			c.Transport = roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, err })
		},
		"SignerFor": func(c *client.Config, err error) {
			c.Signer, c.SignerFor = nil, func(context.Context, string) (signature.Signer, error) { return nil, err }
		},
		"Signer": func(c *client.Config, err error) {
			c.Signer = signFunc(func(*http.Request, signature.Message) error {
				return fmt.Errorf("%w: %w", err, courier.CodeConfigInvalid)
			})
		},
	}
	for errName, tc := range errs {
		for cbName, set := range callbacks {
			t.Run(cbName+" returns "+errName, func(t *testing.T) {
				t.Parallel()
				logs := newCapture(t)
				b := setupWorker(t, statusHandler(http.StatusOK, ""), func(c *client.Config) {
					c.Logger = slog.New(logs)
					set(c, tc.err)
				})
				b.enqueue(t, "n-1", `{}`)
				e := b.work(t)
				if want := map[bool]courier.Code{true: courier.CodeNetwork, false: courier.CodeSigningFailed}[cbName == "Transport"]; e.Code != want {
					t.Fatalf("event %+v; want code %s", e, want)
				}
				var lines []string
				for _, r := range logs.lines("") {
					lines = append(lines, fmt.Sprint(r.Message, r.Attrs))
				}
				attempt := logs.lines(map[bool]string{true: "worker: attempt settled", false: "worker: delivery failed"}[cbName != "Signer"])
				if len(attempt) != 1 {
					t.Fatalf("logged %q; want one line of the attempt", lines)
				}
				if why := attempt[0].Attrs[logkey.Error]; (cbName != "Transport" || tc.transportNames) && !strings.Contains(why, "https://host/") {
					t.Errorf("the attempt's line has error=%q; want the error with its URL redacted", why)
				}
				haystacks := map[string]string{"logs": strings.Join(lines, "\n"), "the event": fmt.Sprintf("%+v", e),
					"the attempts log": tableText(t, b.store, "courier_attempts"), "the outbox": tableText(t, b.store, "courier_outbox")}
				for where, hay := range haystacks {
					for _, secret := range []string{"s3cret", "t0k"} {
						if strings.Contains(hay, secret) {
							t.Errorf("%s hold %q:\n%s", where, secret, hay)
						}
					}
				}
			})
		}
	}
}

// signFunc is a signature.Signer of a function.
type signFunc func(*http.Request, signature.Message) error

func (f signFunc) Sign(r *http.Request, m signature.Message) error { return f(r, m) }

// tableText is every row of s's table, every column, as text.
func tableText(t *testing.T, s *store.Store, table string) string {
	t.Helper()
	return fmt.Sprint(tablerows.Read(t, s, "SELECT * FROM "+table))
}
