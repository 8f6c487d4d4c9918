// Package testserver runs a real courier receiver on a loopback port with
// scripted faults in front of it, in the manner of net/http/httptest: New
// (NewUnstarted + Start), URL, a preconfigured Client and a Close that
// waits for in-flight requests.
//
// The receiver is handler.NewTerminal over the given Store. For each new
// notification it writes one row into the application table
// testserver_effects in the Inbox's transaction, so Effects tells from the
// database alone whether anything was processed twice, whatever faults the
// sender met on the way: 503 and 429 answers, responses held past the
// sender's timeout, connections dropped after the receiver committed, and
// altered Acks.
//
// The package is used by tests and by examples/quickstart, so it does not
// import testing.
package testserver

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// CodeFault is the problem code of an answer a Status fault made up.
const CodeFault courier.Code = "testserver_fault"

// Config configures a Server.
type Config struct {
	// Store is the receiver's database: its Inbox dedupes, and the server
	// creates its application table testserver_effects there. Required.
	// The caller closes it, after the Server.
	Store *store.Store
	// Verifier checks each request's signature. Required.
	Verifier signature.Verifier
	// Script decides each request's fault. Defaults to none: every request
	// reaches the receiver and its answer is sent as it is.
	Script Script
	// Process is optional extra application work, run inside the
	// receiver's transaction after the server's own effect row is written.
	// An error rolls both back (see handler.Func).
	Process func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error
	// Logger is the receiver's logger. Defaults to discarding.
	Logger *slog.Logger
}

func (c Config) validate() error {
	switch {
	case c.Store == nil:
		return configError("Config.Store is required")
	case c.Verifier == nil:
		return configError("Config.Verifier is required")
	}
	return nil
}

func configError(msg string) error {
	return courier.Wrap(courier.ErrConfigInvalid, courier.CodeConfigInvalid, "testserver: "+msg)
}

// Stats counts what the server did. Effects, not Stats, is the truth about
// what was processed: Stats says what the sender was shown.
type Stats struct {
	Requests  int // requests received
	Faulted   int // requests answered by a Status fault, without running the receiver
	Dropped   int // DropAfterCommit faults applied
	Delayed   int // Delay faults applied
	WrongAcks int // 200 answers sent with an altered Ack
	Processed int // receiver answers of 200 for which the application function ran (its transaction committed)
	Replayed  int // receiver answers of 200 for which it did not run: a duplicate answered from the Inbox
	Rejected  int // non-2xx answers of the receiver itself
	// ByID counts requests per notification id (the webhook-id header).
	ByID map[string]int
}

// Server is a courier receiver of terminal notifications behind a fault
// layer, listening on a loopback port.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:port, set by Start.
	// The receiver answers on every path.
	URL string
	// Listener is what Start serves on: 127.0.0.1 on a port the system
	// picks. Replace it between NewUnstarted and Start to serve elsewhere.
	Listener net.Listener
	// HTTPServer is the http.Server Start runs. Set its fields (timeouts,
	// ErrorLog) between NewUnstarted and Start; leave its Handler, the
	// fault layer, alone.
	HTTPServer *http.Server

	cfg       Config
	ts        *httptest.Server
	receiver  http.Handler
	queries   map[string]string
	closing   chan struct{} // closed by Close: pending Delays end
	closeOnce sync.Once
	// onHold, set only by this package's tests before Start, is told when
	// a Delay hold starts (false) and ends (true).
	onHold func(ended bool)

	mu    sync.Mutex
	stats Stats
}

// NewUnstarted validates cfg, creates the application table
// testserver_effects if the store does not have it yet, and returns a
// Server that is not yet listening: set Listener or HTTPServer fields, then
// call Start.
func NewUnstarted(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	queries, err := loadQueries(cfg.Store.Engine())
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		queries: queries,
		closing: make(chan struct{}),
		stats:   Stats{ByID: make(map[string]int)},
	}
	s.receiver, err = handler.NewTerminal(handler.ReceiverConfig{
		Store:    cfg.Store,
		Verifier: cfg.Verifier,
		Logger:   cfg.Logger,
	}, s.apply)
	if err != nil {
		return nil, err
	}
	if err := s.createEffects(context.Background()); err != nil { //nolint:contextcheck // a constructor without a context, like httptest.NewUnstartedServer
		return nil, err
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Listener = s.ts.Listener
	s.HTTPServer = s.ts.Config
	return s, nil
}

// New returns a started Server: NewUnstarted, then Start.
func New(cfg Config) (*Server, error) {
	s, err := NewUnstarted(cfg)
	if err != nil {
		return nil, err
	}
	s.Start()
	return s, nil
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
// in-flight request has finished. It does not close the Store.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.ts.Close()
}

// Client returns an HTTP client for the server, whose idle connections
// Close shuts. Nil before Start.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ByID = maps.Clone(s.stats.ByID)
	return st
}

// attemptKey is the context key of a request's *attemptState.
type attemptKey struct{}

// attemptState is what the receiver's Func reports about one request.
type attemptState struct {
	ran bool // the application function ran for this request
}

// serve is the fault layer in front of the receiver.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("webhook-id")
	s.mu.Lock()
	s.stats.Requests++
	s.stats.ByID[id]++
	attempt := s.stats.ByID[id]
	s.mu.Unlock()

	var f Fault
	if s.cfg.Script != nil {
		f = s.cfg.Script(id, attempt)
	}
	if f.Status != 0 {
		s.answerFault(w, f)
		return
	}

	state := &attemptState{}
	rec := httptest.NewRecorder()
	s.receiver.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), attemptKey{}, state)))
	res := rec.Result()
	body := rec.Body.Bytes()
	wrong := false
	if f.WrongAck && res.StatusCode == http.StatusOK {
		body, wrong = alterAck(body)
	}

	s.mu.Lock()
	switch {
	case res.StatusCode == http.StatusOK && state.ran:
		s.stats.Processed++
	case res.StatusCode == http.StatusOK:
		s.stats.Replayed++
	case res.StatusCode < 200 || res.StatusCode > 299:
		s.stats.Rejected++
	}
	if f.Delay > 0 {
		s.stats.Delayed++
	}
	if f.DropAfterCommit {
		s.stats.Dropped++
	} else if wrong {
		s.stats.WrongAcks++
	}
	s.mu.Unlock()

	if f.Delay > 0 {
		s.hold(r.Context(), f.Delay)
	}
	if f.DropAfterCommit {
		drop(w)
		return
	}
	maps.Copy(w.Header(), res.Header)
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(body)
}

// answerFault answers a Status fault.
func (s *Server) answerFault(w http.ResponseWriter, f Fault) {
	s.mu.Lock()
	s.stats.Faulted++
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
// the receiver has.
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

// ackDigestMember precedes the digest an Ack binds.
var ackDigestMember = []byte(`"notification_sha256":"`)

// alterAck returns a copy of the Ack b with the first hex digit of its
// notification_sha256 changed, and whether it found one to change.
func alterAck(b []byte) ([]byte, bool) {
	i := bytes.Index(b, ackDigestMember)
	if i < 0 || i+len(ackDigestMember) >= len(b) {
		return b, false
	}
	out := bytes.Clone(b)
	j := i + len(ackDigestMember)
	if out[j] == '0' {
		out[j] = '1'
	} else {
		out[j] = '0'
	}
	return out, true
}
