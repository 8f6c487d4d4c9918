package couriertest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/problem"
)

// CodeFault is the problem code of an answer a Status fault made up.
const CodeFault courier.Code = "couriertest_fault"

// Stats counts what a Server did. What the receiver behind it processed is
// for its own database to say (see Effects); Stats says what the sender
// was shown.
type Stats struct {
	Requests  int // requests received
	Faulted   int // answered by a Status fault, without reaching the handler
	Dropped   int // DropAfterCommit faults applied
	Delayed   int // Delay faults applied
	WrongAcks int // 200 answers sent with an altered Ack
	// ByID counts requests per notification id, the id a Script is given:
	// the webhook-id header (or svix-id), else the body's idempotency_key
	// or notification_id, else the body's SHA-256 in hex. Without a
	// Script, a request whose id is in its body is counted here once the
	// handler is done with it.
	ByID map[string]int
	// ByStatus counts the answers sent, by status, the receiver's 408 to
	// a body that stopped arriving (its Body.ReadTimeout) included; a
	// dropped request, and one whose client hung up before its answer (a
	// Delay past the sender's timeout), count under 0.
	ByStatus map[int]int
}

// Server is an httptest.Server in front of a receiver (any http.Handler,
// typically the courier receiver under test) that injects the faults a
// Script decides: error answers, Retry-After, answers held past the
// sender's timeout, connections dropped after the receiver committed, and
// altered Acks. Like httptest.Server it listens on 127.0.0.1 on a port the
// system picks; NewServer starts it, NewUnstartedServer lets fields be set
// first. The receiver reaches the connection through it (with
// http.ResponseController), so its body deadlines (Body.ReadTimeout, 408)
// apply as when it is served alone; its answer is held back for the
// faults, and it cannot hijack the connection. One exception: with a
// Script, a request that sends no id header (RFC 9421, AdCP HMAC, Bearer)
// has its body read whole first, for the id the Script is given, and no
// deadline of the receiver's bounds that read.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:port, set by Start.
	URL string
	// Listener is what Start serves on. Replace it between
	// NewUnstartedServer and Start to serve elsewhere.
	Listener net.Listener
	// HTTPServer is the http.Server Start runs. Set its fields (timeouts,
	// ErrorLog) between NewUnstartedServer and Start; leave Handler alone.
	HTTPServer *http.Server

	handler   http.Handler
	script    Script
	ts        *httptest.Server
	closing   chan struct{} // closed by Close: pending Delays end
	closeOnce sync.Once
	onHold    func(ended bool) // set by this package's tests

	mu    sync.Mutex
	stats Stats
}

// NewServer returns a started Server that serves h behind script (nil:
// no faults). It panics if h is nil (a nil *handler.Receiver too, as a
// NewReceiver that failed returns).
func NewServer(h http.Handler, script Script) *Server {
	s := NewUnstartedServer(h, script)
	s.Start()
	return s
}

// NewUnstartedServer returns a Server that is not yet listening. It
// panics if h is nil, as NewServer does.
func NewUnstartedServer(h http.Handler, script Script) *Server {
	if nilcheck.Nil(h) {
		panic("couriertest: NewServer: the handler is nil (did the receiver's constructor return an error?)")
	}
	s := &Server{
		handler: h,
		script:  script,
		closing: make(chan struct{}),
		stats:   Stats{ByID: make(map[string]int), ByStatus: make(map[int]int)},
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Listener = s.ts.Listener
	s.HTTPServer = s.ts.Config
	return s
}

// Start starts serving and sets URL. It panics if the server was started
// already.
func (s *Server) Start() {
	if s.Listener != s.ts.Listener {
		s.ts.Listener.Close() // the default one, replaced
		s.ts.Listener = s.Listener
	}
	s.ts.Config = s.HTTPServer
	s.ts.Start()
	s.URL = s.ts.URL
}

// Close stops the server, ends pending Delays early and waits until every
// request in flight has finished. It closes Listener, started or not.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	if s.URL == "" && s.Listener != nil && s.Listener != s.ts.Listener {
		// Never started: the listener given in place of the default
		// one is still the caller's field alone, and closed here as
		// httptest.Server's Close closes the Listener it holds.
		s.Listener.Close()
	}
	s.ts.Close()
}

// Client returns an HTTP client for the server. Nil before Start.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Guard returns a client.Guard that lets a worker reach this server:
// plain http to 127.0.0.1 on its port (see the package's Guard for what
// else it lets through). Call it after Start: before, it panics.
func (s *Server) Guard() client.Guard {
	if s.URL == "" {
		panic("couriertest: Server.Guard called before Start: the server has no address yet")
	}
	return Guard(s.URL)
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ByID, st.ByStatus = maps.Clone(s.stats.ByID), maps.Clone(s.stats.ByStatus)
	return st
}

// Guard returns a client.Guard that lets a worker reach the server at
// serverURL, the URL of a test server (httptest.NewServer's, or a
// Server's): its loopback address and port, over http, or over https for
// an httptest TLS server, whose certificate the Guard's transport trusts
// only once given the server's TLS configuration, as the system's
// certificate authorities do not vouch for it:
//
//	g := couriertest.Guard(srv.URL) // srv started with httptest.NewTLSServer
//	g.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
//
// The zero Guard refuses loopback, private addresses, plain http and
// ports other than 443, as it should in production; tests open it this
// way, for one server. The rest of the production policy stands, with what the opening
// adds to it: the Guard's AllowHTTP and AllowPorts apply to every
// address, so besides https to public addresses it lets plain http
// through to a public address on 443 or on the server's port. A test that
// must reach nothing else gives its deliveries the server's URLs only.
// Guard panics if serverURL is not a URL with an IP host and a port.
func Guard(serverURL string) client.Guard {
	u, err := url.Parse(serverURL)
	if err != nil {
		panic("couriertest: Guard: " + err.Error())
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		panic("couriertest: Guard: the server's host is not an IP address: " + u.Hostname())
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil {
		panic("couriertest: Guard: the server's URL has no port")
	}
	return client.Guard{
		AllowPrefixes: []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())},
		AllowPorts:    []uint16{uint16(port)},
		AllowHTTP:     u.Scheme == "http",
	}
}

// serve is the fault layer in front of the handler.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// Without a Script, an id in the body is read as the handler reads the
	// body, under its deadlines, and counted once it has.
	body := &deadlineBody{ReadCloser: r.Body}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = body
	}
	id, known := headerID(r)
	var tee *teeBody
	switch {
	case known:
	case s.script != nil:
		id, known = bodyID(r), true
	case r.Body == nil || r.Body == http.NoBody:
		id, known = idOf(nil), true
	default:
		tee = &teeBody{ReadCloser: r.Body}
		r.Body = tee
	}
	s.mu.Lock()
	s.stats.Requests++
	attempt := 0
	if known {
		s.stats.ByID[id]++
		attempt = s.stats.ByID[id]
	}
	s.mu.Unlock()

	var f Fault
	if s.script != nil {
		f = s.script(id, attempt)
	}
	if f.Status != 0 {
		s.answerFault(w, f)
		return
	}

	rec := &recorder{ResponseRecorder: httptest.NewRecorder(), conn: w}
	s.handler.ServeHTTP(rec, r)
	if tee != nil {
		id = tee.id()
		s.mu.Lock()
		s.stats.ByID[id]++
		s.mu.Unlock()
	}
	res := rec.Result()
	answer := rec.Body.Bytes()
	wrong := false
	if f.WrongAck && res.StatusCode == http.StatusOK {
		answer, wrong = alterAck(answer)
	}
	if f.Delay > 0 {
		s.hold(r.Context(), f.Delay)
	}
	// A client that hung up (its timeout ran out during the Delay, or
	// during the handler) is shown no answer, whatever is written below.
	// The request's context ends too when a read of the body runs past
	// the receiver's deadline; that client is still there, and is shown
	// the receiver's answer (408).
	gone := r.Context().Err() != nil && !body.timedOut.Load()
	s.mu.Lock()
	switch {
	case f.DropAfterCommit:
		s.stats.Dropped++
		s.stats.ByStatus[0]++
	case gone:
		s.stats.ByStatus[0]++
	case wrong:
		s.stats.WrongAcks++
		s.stats.ByStatus[res.StatusCode]++
	default:
		s.stats.ByStatus[res.StatusCode]++
	}
	if f.Delay > 0 {
		s.stats.Delayed++
	}
	s.mu.Unlock()

	if f.DropAfterCommit {
		drop(w)
		return
	}
	maps.Copy(w.Header(), res.Header)
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(answer)
}

// deadlineBody is a request's body that notes whether a read of it ran
// past the connection's read deadline (the receiver's body deadline).
type deadlineBody struct {
	io.ReadCloser
	timedOut atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.timedOut.Store(true)
	}
	return n, err
}

// recorder holds the handler's answer back, for the fault layer to alter,
// delay or drop, while the handler reaches the connection for what it sets
// on the request (the read deadlines a receiver bounds its body with, and
// with which it discards the rest of a refused one), as it does served by
// itself.
type recorder struct {
	*httptest.ResponseRecorder
	conn http.ResponseWriter
}

// Unwrap lets http.ResponseController reach the connection's writer: its
// read and write deadlines. Flush is the recorder's own.
func (r *recorder) Unwrap() http.ResponseWriter { return r.conn }

// Hijack refuses: the fault layer writes the answer on the connection.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, fmt.Errorf("couriertest: the fault layer writes the answer: %w", http.ErrNotSupported)
}

// headerID returns the id r's attempts are counted under when r names
// it in a header: Standard Webhooks sends it as webhook-id, Svix as
// svix-id. The other schemes (RFC 9421, AdCP HMAC, Bearer) send none, and
// it is the body's (see bodyID).
func headerID(r *http.Request) (string, bool) {
	if id := r.Header.Get("webhook-id"); id != "" {
		return id, true
	}
	if id := r.Header.Get("svix-id"); id != "" {
		return id, true
	}
	return "", false
}

// bodyID reads r's body for the id its attempts are counted under, and
// leaves r.Body reading the same bytes for the handler.
func bodyID(r *http.Request) string {
	body, _ := io.ReadAll(r.Body) // a read error is the handler's to meet: it reads on from r.Body after body
	r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	return idOf(body)
}

// idOf returns the id of a body: its idempotency_key (AdCP) or
// notification_id, and for a body with neither its SHA-256 in hex: a
// redelivery sends the same bytes.
func idOf(body []byte) string {
	var ids struct {
		IdempotencyKey string `json:"idempotency_key"`
		NotificationID string `json:"notification_id"`
	}
	_ = json.Unmarshal(body, &ids) // not JSON, or not these: the digest below
	switch {
	case ids.IdempotencyKey != "":
		return ids.IdempotencyKey
	case ids.NotificationID != "":
		return ids.NotificationID
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// teeBody keeps what the handler reads of a request's body, for its id.
type teeBody struct {
	io.ReadCloser
	read bytes.Buffer
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read.Write(p[:n])
	return n, err
}

// id returns the body's id (idOf) once the handler is done with it,
// reading what the handler left: a body refused before it was read, as
// one the fault layer reads first. A body cut short by the handler's
// deadline, or closed, ends at once, with what had arrived.
func (b *teeBody) id() string {
	_, _ = io.Copy(&b.read, b.ReadCloser)
	return idOf(b.read.Bytes())
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// answerFault answers a Status fault.
func (s *Server) answerFault(w http.ResponseWriter, f Fault) {
	s.mu.Lock()
	s.stats.Faulted++
	if f.Status < 200 || f.Status > 599 {
		s.stats.ByStatus[http.StatusInternalServerError]++
	} else {
		s.stats.ByStatus[f.Status]++
	}
	s.mu.Unlock()
	if f.Status < 200 || f.Status > 599 {
		problem.Error(w, http.StatusInternalServerError, CodeFault, "the script's fault status is not within 200..599")
		return
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	problem.Error(w, f.Status, CodeFault, "fault injected by the test server")
}

// hold waits d, or less if the client hangs up or the server closes. The
// server only notices a hang-up once it has read the request body, which
// the handler has.
func (s *Server) hold(ctx context.Context, d time.Duration) {
	if s.onHold != nil {
		s.onHold(false)
		defer s.onHold(true)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.closing:
	}
}

// drop closes the connection without answering.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil { // not HTTP/1: abort the stream instead
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// ackDigestMembers precede the digest an answer binds the request by: an
// Ack's, and a Source's command response's.
var ackDigestMembers = [][]byte{[]byte(`"notification_sha256":"`), []byte(`"payload_sha256":"`)}

// alterAck returns a copy of the answer b with the first hex digit of its
// digest (an Ack's notification_sha256, a command response's
// payload_sha256) changed, and whether it found one to change.
func alterAck(b []byte) ([]byte, bool) {
	for _, m := range ackDigestMembers {
		i := bytes.Index(b, m)
		if i < 0 || i+len(m) >= len(b) {
			continue
		}
		out := bytes.Clone(b)
		j := i + len(m)
		if out[j] == '0' {
			out[j] = '1'
		} else {
			out[j] = '0'
		}
		return out, true
	}
	return b, false
}
