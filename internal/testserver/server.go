// Package testserver runs a real courier terminal receiver on a loopback
// port behind couriertest's fault layer: the receiver is
// handler.NewReceiver of ack.Terminal over the given Store, and for each new notification
// it records one effect (couriertest.Effects) in the Inbox's transaction,
// so Effects tells from the database alone whether anything was processed
// twice, whatever faults the sender met on the way.
//
// The package is used by courier's tests, the crash harness, the bench
// and examples/quickstart; applications use couriertest.
package testserver

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// Config configures a Server.
type Config struct {
	// Store is the receiver's database: its Inbox dedupes, and the server
	// records its effects there. Required. The caller closes it, after
	// the Server.
	Store *store.Store
	// Verifier checks each request's signature. Required.
	Verifier signature.Verifier
	// Script decides each request's fault. Defaults to none.
	Script couriertest.Script
	// Process is optional extra application work, run inside the
	// receiver's transaction after the server's own effect is recorded.
	// An error rolls both back (see handler.Func).
	Process func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error
	// Logger is the receiver's (handler.ReceiverConfig.Logger).
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
	return &coded.Error{Code: courier.CodeConfigInvalid, Msg: "testserver: " + msg}
}

// Stats counts what the server did: couriertest.Stats for the fault layer,
// and what the receiver behind it answered.
type Stats struct {
	couriertest.Stats
	Processed int // receiver answers of 200 for which the application function ran (its transaction committed)
	Replayed  int // receiver answers of 200 for which it did not run: a duplicate answered from the Inbox
	Rejected  int // non-2xx answers of the receiver itself
}

// Server is a courier receiver of terminal notifications behind a fault
// layer, listening on a loopback port. Its couriertest.Server gives URL,
// Listener, HTTPServer, Start, Close, Client and Guard.
type Server struct {
	*couriertest.Server

	cfg      Config
	effects  *couriertest.Effects
	receiver http.Handler

	mu                            sync.Mutex
	processed, replayed, rejected int
}

// NewUnstarted validates cfg, creates the effects table if the store does
// not have it yet, and returns a Server that is not yet listening.
func NewUnstarted(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	effects, err := couriertest.NewEffects(context.Background(), cfg.Store) //nolint:contextcheck // a constructor without a context, like httptest.NewUnstartedServer
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, effects: effects}
	s.receiver, err = handler.NewReceiver(handler.ReceiverConfig{Store: cfg.Store, Verifier: cfg.Verifier, Logger: cfg.Logger}, s.apply)
	if err != nil {
		return nil, err
	}
	s.Server = couriertest.NewUnstartedServer(http.HandlerFunc(s.receive), cfg.Script)
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

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{Stats: s.Server.Stats()}
	s.mu.Lock()
	st.Processed, st.Replayed, st.Rejected = s.processed, s.replayed, s.rejected
	s.mu.Unlock()
	return st
}

// Effects returns, per notification id, how many effects are committed in
// the store: the exactly-once truth, independent of Stats. An id that was
// never processed is absent.
func (s *Server) Effects(ctx context.Context) (map[string]int, error) {
	return s.effects.Counts(ctx)
}

// attemptKey is the context key of a request's *attemptState.
type attemptKey struct{}

// attemptState is what the receiver's Func reports about one request.
type attemptState struct {
	ran bool // the application function ran for this request
}

// receive runs the receiver and counts what it answered.
func (s *Server) receive(w http.ResponseWriter, r *http.Request) {
	state := &attemptState{}
	sw := &statusWriter{ResponseWriter: w}
	s.receiver.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), attemptKey{}, state)))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case sw.status == http.StatusOK && state.ran:
		s.processed++
	case sw.status == http.StatusOK:
		s.replayed++
	case sw.status < 200 || sw.status > 299:
		s.rejected++
	}
}

// apply is the receiver's Func: it records one effect in the receiver's
// transaction, runs Config.Process, and marks the request's attempt as
// processed.
func (s *Server) apply(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
	if a, ok := ctx.Value(attemptKey{}).(*attemptState); ok {
		a.ran = true // the receiver runs Func on the request's goroutine
	}
	if err := s.effects.Record(ctx, tx, n.NotificationID); err != nil {
		return err
	}
	if s.cfg.Process != nil {
		return s.cfg.Process(ctx, tx, n)
	}
	return nil
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath: the
// receiver sets its body's read deadlines through it.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
