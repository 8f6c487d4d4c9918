package client_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/admin"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// rawH2Server is a receiver speaking HTTP/2 without TLS (prior knowledge)
// at the frame level, answering every request whole with a HEADERS frame
// whose :status is status, as written: an HTTP/2 peer may write any
// digits there, where HTTP/1's status line holds three. It returns the
// server's URL; connections are closed at cleanup.
func rawH2Server(t *testing.T, status string) string {
	t.Helper()
	frame := func(typ, flags byte, stream uint32, payload []byte) []byte {
		h := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(h[5:], stream)
		return append(h, payload...)
	}
	// HPACK: a literal field without indexing whose name is the static
	// table's entry 8 (:status), its value a plain string.
	block := append([]byte{0x08, byte(len(status))}, status...)
	return rawListener(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		if _, err := io.ReadFull(r, make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))); err != nil {
			return
		}
		c.Write(frame(0x4, 0, 0, nil)) // SETTINGS: the server's preface
		head := make([]byte, 9)
		for {
			if _, err := io.ReadFull(r, head); err != nil {
				return
			}
			n := int(head[0])<<16 | int(head[1])<<8 | int(head[2])
			typ, flags, stream := head[3], head[4], binary.BigEndian.Uint32(head[5:])&0x7fffffff
			if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
				return
			}
			switch {
			case typ == 0x4 && flags&0x1 == 0: // SETTINGS, not an ACK
				c.Write(frame(0x4, 0x1, 0, nil))
			case (typ == 0x0 || typ == 0x1) && flags&0x1 != 0 && stream != 0: // the request's END_STREAM
				c.Write(frame(0x1, 0x4|0x1, stream, block)) // END_HEADERS, END_STREAM
			}
		}
	})
}

// h2cTransport sends over HTTP/2 without TLS, as to rawH2Server.
func h2cTransport(t *testing.T) *http.Transport {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// engines open a fresh outbox, one on each engine.
var engines = []struct {
	name string
	open func(t *testing.T) *store.Store
}{
	{"sqlite", openOutbox},
	{"postgres", func(t *testing.T) *store.Store { return couriertest.PostgresStore(t, store.Config{}) }},
}

// recorded returns delivery id as s holds it, and its attempt log.
func recorded(t *testing.T, s *store.Store, id int64) (store.Delivery, []store.Attempt) {
	t.Helper()
	d, err := s.Outbox.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	atts, err := s.Outbox.Attempts(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d, atts
}

// TestAnHTTP2StatusOfOtherThanThreeDigitsIsSettled: over HTTP/2 a
// receiver's :status is whatever digits it writes, and Go's transport
// takes any int. 4294967296 does not fit PostgreSQL's integer columns:
// the settle failed, and was tried again until the lease ran out, the
// delivery leased all along and its attempt never recorded (nor those of
// the outcomes settled in the same transaction); SQLite recorded a status
// no HTTP answer has. Over HTTP/1 the transport refuses a status line
// whose code is not three digits, a malformed answer: the worker judges
// such an answer over HTTP/2 alike, on both engines, a network_error
// retried, with no status recorded.
func TestAnHTTP2StatusOfOtherThanThreeDigitsIsSettled(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		for _, status := range []string{"4294967296", "-1", "1000"} {
			t.Run(e.name+"/"+status, func(t *testing.T) {
				t.Parallel()
				s := e.open(t)
				url := rawH2Server(t, status)
				events := make(chan client.Event, 1)
				// The worker's clock stands still: however long the
				// machine takes from the claim to the attempt, the lease
				// covers the attempt's Timeout, and the delivery is sent
				// rather than given back unsent. The default Lease and
				// Timeout bound the store's fence and the request.
				w, err := client.NewWorker(client.Config{Store: s, Owner: "w", Signer: newSigner(t), Transport: h2cTransport(t),
					Now: newWorkerClock().Now, Hook: func(e client.Event) { events <- e }})
				if err != nil {
					t.Fatal(err)
				}
				id := enqueueOne(t, s, plain(url+"/hooks", "n-1"))
				if n, err := w.Work(t.Context()); n != 1 || err != nil {
					t.Fatalf("Work = %d, %v; want one delivery", n, err)
				}
				var ev client.Event
				select {
				case ev = <-events: // the Hook ran on the attempt's goroutine, which Work waited for
				default:
					d, _ := recorded(t, s, id)
					t.Fatalf(":status %s: Work returned with no attempt settled; delivery %s, leased by %q", status, d.Status, d.LeaseOwner)
				}
				d, atts := recorded(t, s, id)
				if ev.Unrecorded || d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeNetwork || d.LastHTTPStatus != 0 ||
					len(atts) != 1 || atts[0].ErrorCode != courier.CodeNetwork || atts[0].HTTPStatus != 0 {
					t.Fatalf(":status %s: event %s/%s (unrecorded %v), delivery %s/%s http %d, attempts %+v; want a recorded retry, network_error, no status",
						status, ev.Status, ev.Code, ev.Unrecorded, d.Status, d.LastErrorCode, d.LastHTTPStatus, atts)
				}
			})
		}
	}
}

// TestWhatAHostileReceiverSendsStaysOutOfTheRecord: receivers answer with
// bytes neither engine should store as text (NUL, invalid UTF-8, ANSI
// escapes, control characters, more than a code's length) in the body, a
// problem's code, headers, Retry-After, a redirect's Location and the
// status line, or echo the request back, credentials and all; another
// endpoint's URL holds credentials in its userinfo and query, and its
// receiver resets the connection. On each engine, every attempt must be
// settled with its stable code (none left leased: a settle the database
// refused would send it again), and none of what the receivers sent, nor
// the bearer token, the signing secret or the signatures, nor the URL's
// credentials, may reach the attempts log, the delivery, the logs, the
// Events, or the admin API's and page's views of the deliveries.
func TestWhatAHostileReceiverSendsStaysOutOfTheRecord(t *testing.T) {
	t.Parallel()
	const canary = "CANARY"
	hostile := canary + "\x00\x1b[2J\x1b]52;c;Q0FOQVJZ\x07\xff\xfe\r\x7f"
	notText := canary + "\xff\xfe\xc0\x80"
	seen := struct {
		sync.Mutex
		creds []string // what the receiver was sent as credentials
	}{}
	echo := func(w http.ResponseWriter, r *http.Request, status int, contentType string) {
		body, _ := io.ReadAll(r.Body)
		seen.Lock()
		for _, h := range []string{"Authorization", "Webhook-Signature"} {
			if v := r.Header.Get(h); v != "" {
				seen.creds = append(seen.creds, v, strings.TrimPrefix(v, "Bearer "), strings.TrimPrefix(v, "v1,"))
			}
		}
		seen.Unlock()
		doc, _ := json.Marshal(map[string]any{"code": r.Header.Get("Authorization"), "headers": r.Header, "body": string(body), "note": canary})
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		w.Write(doc)
	}
	problem := func(status int, doc string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(status)
			io.WriteString(w, doc)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo-refused", func(w http.ResponseWriter, r *http.Request) { echo(w, r, 400, "application/problem+json") })
	mux.HandleFunc("/echo-ok", func(w http.ResponseWriter, r *http.Request) { echo(w, r, 200, "application/json") })
	mux.Handle("/code-nul-escaped", problem(422, `{"code":"bad\u0000`+canary+`"}`))
	mux.Handle("/code-nul-raw", problem(422, "{\"code\":\"bad\x00"+canary+"\"}"))
	mux.Handle("/code-not-utf8", problem(422, "{\"code\":\"bad\xff\xfe"+canary+"\"}"))
	mux.Handle("/code-ansi", problem(422, `{"code":"\u001b[31m`+canary+`"}`))
	mux.Handle("/code-too-long", problem(422, `{"code":"`+strings.Repeat("c", 129)+`"}`))
	mux.Handle("/code-longest", problem(422, `{"code":"`+strings.Repeat("c", 128)+`"}`))
	mux.Handle("/code-huge", problem(422, `{"code":"`+strings.Repeat("c", 1<<20)+`"}`))
	// Go's transport refuses a header line with a control character (a
	// malformed answer: network_error), and takes one that is not UTF-8.
	headers := func(value string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header()["Retry-After"] = []string{"3" + value}
			w.Header()["X-Evil"] = []string{value + strings.Repeat("x", 32<<10)}
			w.Header()["Content-Type"] = []string{"application/problem+json; charset=" + value}
			w.WriteHeader(503)
			io.WriteString(w, hostile)
		}
	}
	mux.Handle("/headers-control", headers(hostile))
	mux.Handle("/headers-not-utf8", headers(notText))
	redirect := func(value string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header()["Location"] = []string{"https://" + canary + ":pw@10.9.8.7/" + value + "?token=" + value}
			w.WriteHeader(302)
		}
	}
	mux.Handle("/redirect-control", redirect(hostile))
	mux.Handle("/redirect-not-utf8", redirect(notText))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	raw := rawServer(t, func(c net.Conn, r *http.Request, body []byte) {
		switch r.URL.Path {
		case "/status-line":
			io.WriteString(c, "HTTP/1.1 418 "+hostile+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			c.Close() // rawServer reads one request a connection
		case "/reset":
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	})
	type want struct {
		status courier.Status
		code   courier.Code
		http   int
		remote courier.Code
	}
	paths := map[string]want{
		"/echo-refused":      {courier.StatusFailed, courier.CodeReceiverRejected, 400, ""},
		"/echo-ok":           {courier.StatusFailed, courier.CodeAckInvalid, 200, ""},
		"/code-nul-escaped":  {courier.StatusFailed, courier.CodeReceiverRejected, 422, ""},
		"/code-nul-raw":      {courier.StatusFailed, courier.CodeReceiverRejected, 422, ""},
		"/code-not-utf8":     {courier.StatusFailed, courier.CodeReceiverRejected, 422, ""},
		"/code-ansi":         {courier.StatusFailed, courier.CodeReceiverRejected, 422, ""},
		"/code-too-long":     {courier.StatusFailed, courier.CodeReceiverRejected, 422, ""},
		"/code-longest":      {courier.StatusFailed, courier.CodeReceiverRejected, 422, courier.Code(strings.Repeat("c", 128))},
		"/code-huge":         {courier.StatusFailed, courier.CodeReceiverRejected, 422, ""},
		"/headers-control":   {courier.StatusRetryWait, courier.CodeNetwork, 0, ""},
		"/headers-not-utf8":  {courier.StatusRetryWait, courier.CodeReceiverUnavailable, 503, ""},
		"/redirect-control":  {courier.StatusRetryWait, courier.CodeNetwork, 0, ""},
		"/redirect-not-utf8": {courier.StatusFailed, courier.CodeDestinationForbidden, 302, ""},
		"/status-line":       {courier.StatusFailed, courier.CodeReceiverRejected, 418, ""},
	}
	secret := signature.NewStandardWebhooksSecret()
	whsec, err := signature.ParseStandardWebhooksKey("k1", secret)
	if err != nil {
		t.Fatal(err)
	}
	token, err := signature.ParseSecret("t1", "Tok3n-"+strings.Repeat("Zq9", 12))
	if err != nil {
		t.Fatal(err)
	}
	signers := map[string]signature.Signer{}
	if signers["whsec"], err = signature.NewStandardWebhooksSigner(whsec); err != nil {
		t.Fatal(err)
	}
	if signers["bearer"], err = signature.NewBearerSigner(token); err != nil {
		t.Fatal(err)
	}
	raw64 := strings.TrimPrefix(secret, "whsec_")
	const urlSecret = "Pa55w0rdInTheURL"
	reset := strings.Replace(raw, "http://", "http://alice:"+urlSecret+"@", 1) + "/reset?token=" + urlSecret

	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			s := e.open(t)
			logs := &lockedBuffer{}
			logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var mu sync.Mutex
			var events []client.Event
			g, r := loopbackGuard(t, srv.URL), loopbackGuard(t, raw)
			guard := client.Guard{AllowHTTP: true, AllowPorts: append(g.AllowPorts, r.AllowPorts...), AllowPrefixes: g.AllowPrefixes}
			w, err := client.NewWorker(client.Config{Store: s, Owner: "w", Logger: logger, Transport: guard.Transport(),
				SignerFor: func(_ context.Context, keyID string) (signature.Signer, error) { return signers[keyID], nil },
				Timeout:   2 * time.Second, Lease: time.Minute, Concurrency: 64,
				Hook: func(e client.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }})
			if err != nil {
				t.Fatal(err)
			}
			endpoints := map[int64]string{} // delivery -> path
			var ps []store.EnqueueParams
			for path := range paths {
				base := srv.URL
				if path == "/status-line" {
					base = raw
				}
				for _, keyID := range []string{"whsec", "bearer"} {
					ps = append(ps, store.EnqueueParams{NotificationID: keyID + path[1:], Endpoint: base + path, KeyID: keyID, Payload: []byte(`{}`)})
				}
			}
			ps = append(ps, store.EnqueueParams{NotificationID: "reset", Endpoint: reset, KeyID: "bearer", Payload: []byte(`{}`)})
			for _, p := range ps {
				endpoints[enqueueOne(t, s, p)] = p.Endpoint
			}
			if n, err := w.Work(t.Context()); n != len(ps) || err != nil {
				t.Fatalf("Work = %d, %v; want %d deliveries", n, err, len(ps))
			}

			admin, err := admin.NewHandler(admin.Config{Store: s})
			if err != nil {
				t.Fatal(err)
			}
			var views []string
			for id, ep := range endpoints {
				d, atts := recorded(t, s, id)
				wt := want{courier.StatusRetryWait, courier.CodeNetwork, 0, ""}
				if ep != reset {
					wt = paths[ep[strings.LastIndex(ep, "/"):]]
				}
				if d.Status != wt.status || d.LastErrorCode != wt.code || d.LastHTTPStatus != wt.http || d.LastRemoteCode != wt.remote ||
					len(atts) != 1 || atts[0].ErrorCode != wt.code || atts[0].HTTPStatus != wt.http || atts[0].RemoteCode != wt.remote {
					t.Errorf("%s: delivery %s/%s http %d remote %q, attempts %+v; want %s/%s http %d remote %q on the delivery and its one attempt",
						d.NotificationID, d.Status, d.LastErrorCode, d.LastHTTPStatus, d.LastRemoteCode, atts, wt.status, wt.code, wt.http, wt.remote)
				}
				d.Endpoint = "" // the URL enqueued, credentials and all
				views = append(views, fmt.Sprintf("%+v %+v", d, atts))
				for _, path := range []string{"/api/deliveries/", "/deliveries/"} {
					rec := httptest.NewRecorder()
					admin.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, path+strconv.FormatInt(id, 10), nil))
					if rec.Code != http.StatusOK {
						t.Fatalf("admin %s%d: %d", path, id, rec.Code)
					}
					views = append(views, rec.Body.String())
				}
			}
			mu.Lock()
			for _, e := range events {
				if e.Unrecorded || e.LeaseLost {
					t.Errorf("delivery %d: its attempt was not recorded (%+v)", e.DeliveryID, e)
				}
			}
			reported := fmt.Sprintf("%+v", events)
			mu.Unlock()
			var rows []string
			if err := s.DB().Select(&rows, "SELECT owner || '|' || outcome || '|' || COALESCE(error_code, '') || '|' || COALESCE(remote_code, '') FROM courier_attempts"); err != nil {
				t.Fatal(err)
			}
			// The run did what it should: every attempt logged and recorded,
			// the receiver's one valid code kept, credentials sent to it.
			if len(rows) != len(ps) || !strings.Contains(logs.String(), `"remote_code":"`+strings.Repeat("c", 128)+`"`) || len(seen.creds) == 0 {
				t.Fatalf("%d attempts logged of %d, %d credentials seen; logs:\n%s", len(rows), len(ps), len(seen.creds), logs)
			}
			seen.Lock()
			needles := append([]string{canary, "\x1b", "\x00", "\xff", urlSecret, secret, raw64, token.ID() + "Tok3n", "Tok3n-Zq9", "alice"}, seen.creds...)
			seen.Unlock()
			for name, hay := range map[string]string{"the logs": logs.String(), "the Events": reported, "the attempts log": strings.Join(rows, "\n"), "the deliveries and admin views": strings.Join(views, "\n")} {
				for _, needle := range needles {
					if needle != "" && strings.Contains(hay, needle) {
						t.Errorf("%s hold %q", name, needle)
					}
				}
			}
		})
	}
}
