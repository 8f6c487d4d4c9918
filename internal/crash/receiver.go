package crash

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/serve"
	"github.com/courier-go/courier/signature"
)

// listenBound is how long a restarted receiver keeps trying to bind its
// fixed address; bindPoll is how often it tries.
const (
	listenBound = 10 * time.Second
	bindPoll    = 20 * time.Millisecond
)

// RunReceiver is the body of a receiver process: handler.NewReceiver of ack.Terminal over
// its own inbox database on the fixed address s.Addr, whose application
// function writes one crash_effects row in the receiver's transaction. It
// serves until ctx is done; ready is called once it listens.
//
// With s.SelfKill > 0 the function marks that share of the notifications
// it processes, at random, and the process kills itself with SIGKILL once
// such a request's transaction has committed, before a byte of the answer
// is written: the sender then holds a delivery the receiver completed but
// never acknowledged.
func RunReceiver(ctx context.Context, s Spec, logger *slog.Logger, ready func()) error {
	st, q, key, err := s.open(ctx)
	if err != nil {
		return err
	}
	defer Close(st)
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: SenderName, Keys: []signature.StandardWebhooksKey{key},
	})
	if err != nil {
		return err
	}
	dice := newDice(s.Seed, s.Incarnation, s.SelfKill)
	var root http.Handler
	if s.Mode == ModeControl {
		if root, err = controlHandler(s, st, q, verifier, logger, dice); err != nil {
			return err
		}
	}
	insertEffect := q["insert_effect"]
	terminal, err := handler.NewReceiver(handler.ReceiverConfig{Store: st, Verifier: verifier, Logger: logger},
		func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
			if _, err := tx.ExecContext(ctx, insertEffect, n.NotificationID, time.Now().UnixMicro()); err != nil {
				return fmt.Errorf("crash: insert effect: %w", err)
			}
			if dice.roll() {
				armSelfKill(ctx)
			}
			return nil
		})
	if err != nil {
		return err
	}
	ln, err := listen(ctx, s.Addr)
	if err != nil {
		return err
	}
	if root == nil {
		root = killAfterCommit(terminal)
	}
	srv := serve.Server(root)
	srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	ready() // the listener is bound: connections queue until Serve
	return serve.Run(ctx, srv, ln)
}

// listen binds addr, retrying for a while: the port is the one the
// receiver's predecessor served on, and is normally free again at once.
func listen(ctx context.Context, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	bound := time.NewTimer(listenBound)
	defer bound.Stop()
	tick := time.NewTicker(bindPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-bound.C:
			return nil, fmt.Errorf("crash: listen: %w", err)
		case <-tick.C:
			if ln, err = net.Listen("tcp", addr); err == nil {
				return ln, nil
			}
		}
	}
}

// dice decides which processed notifications end in a self-kill.
type dice struct {
	p   float64
	mu  sync.Mutex
	rng *rand.Rand
}

func newDice(seed uint64, incarnation int, p float64) *dice {
	return &dice{p: p, rng: rand.New(rand.NewPCG(seed, 1<<32+uint64(incarnation)))}
}

func (d *dice) roll() bool {
	if d.p <= 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.Float64() < d.p
}

// selfKillKey is the context key of a request's *atomic.Bool: set, the
// process dies as soon as the request's answer is about to be written.
type selfKillKey struct{}

// armSelfKill marks the request of ctx; its answer will not be sent.
func armSelfKill(ctx context.Context) {
	if armed, ok := ctx.Value(selfKillKey{}).(*atomic.Bool); ok {
		armed.Store(true)
	}
}

// killAfterCommit wraps the receiver: a request whose application
// function armed a self-kill kills the process when its 200 is about to be
// written, which the receiver does only after its transaction committed.
func killAfterCommit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		armed := new(atomic.Bool)
		r = r.WithContext(context.WithValue(r.Context(), selfKillKey{}, armed))
		next.ServeHTTP(&dyingWriter{ResponseWriter: w, armed: armed}, r)
	})
}

// dyingWriter kills the process instead of answering an armed request.
type dyingWriter struct {
	http.ResponseWriter
	armed       *atomic.Bool
	wroteHeader bool
}

func (w *dyingWriter) WriteHeader(code int) {
	if !w.wroteHeader && code == http.StatusOK && w.armed.Load() {
		die()
	}
	w.wroteHeader = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *dyingWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *dyingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// die kills this process with SIGKILL, saying so on stderr first (an
// unbuffered write, so the parent reads it even though nothing runs after).
func die() {
	fmt.Fprintln(os.Stderr, SelfKillLine)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way; nothing more of this request runs
}
