package handler

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/jsonbody"
	"github.com/courier-go/courier/internal/logdefault"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/recovered"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/verified"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// Outcome is what became of one request a handler answered, as its Event
// reports it: one of the four below, whatever the receiver.
type Outcome string

// Outcomes a handler reports in Events.
const (
	OutcomeAccepted  Outcome = "accepted"  // processed now
	OutcomeDuplicate Outcome = "duplicate" // answered from the Inbox
	OutcomeRejected  Outcome = "rejected"  // refused: 4xx
	OutcomeFailed    Outcome = "failed"    // 5xx: the sender retries
)

// Event reports one answered request, for metrics: its HTTP status, what
// became of it and the problem's code (empty for a success). No content.
// The names are client.Event's: HTTPStatus is the status on the wire, Code
// the problem's code.
//
// It reports the answer, not whose fault it was. A request whose client
// went away once its body had arrived (net/http ends the request's
// context when the connection closes) and that ended with it is reported
// as it was answered: Outcome failed, HTTPStatus 503 with Code
// internal_error when a store call ended with the context, or 500 with
// handler_failed when the application's function returned the context's
// error, although neither the store nor the application failed. So a
// count of failed Events counts clients' timeouts and hang-ups too; the
// Logger's line tells them apart (at Info, not Error; see the package
// doc). One whose client went away mid-body is rejected, 400
// invalid_argument.
type Event struct {
	Outcome    Outcome      // OutcomeAccepted, OutcomeDuplicate, OutcomeRejected or OutcomeFailed
	HTTPStatus int          // the status answered
	Code       courier.Code // the problem's code, "" for a success
}

// front is what every handler here shares: how a request gets in, and how
// its answer is reported.
type front struct {
	verifier signature.Verifier
	body     middleware.BodyLimits
	logger   *slog.Logger
	hook     func(Event)
	tracer   courier.Tracer
	// hidden is set once a request's ResponseWriter was found not to
	// reach the server's connection, so that it is logged once.
	hidden *atomic.Bool
}

// handler returns the way in of a handler: the answer is watched, to be
// reported; then 405 and 415; then the body is read, bounded (413), and
// its signature verified (401) before receive is given the body and the
// verified sender.
func (f front) handler(receive func(w http.ResponseWriter, r *http.Request, body []byte, p signature.Principal)) http.Handler {
	verified := middleware.Verify(f.verifier, f.body)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := verified.Body(r.Context())
		p, _ := middleware.PrincipalFromContext(r.Context())
		receive(w, r, body, p)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, func(w http.ResponseWriter, r *http.Request) {
			if writerctx.Held(r.Context()) {
				answer(w, errNested)
				return
			}
			if !f.hidden.Load() && hidesConn(w, r) && f.hidden.CompareAndSwap(false, true) {
				f.warnHidden(r.Context())
			}
			if jsonbody.PostJSON(w, r) {
				verified.ServeHTTP(w, r)
			}
		})
	})
}

// errNested is a handler served where its request already holds a
// transaction of the Store's: inside middleware.Transaction, or from an
// application's function. The handler begins a transaction of its own
// (and its verifier may write to the replay cache): on SQLite it would
// wait for the one writer its own request holds; on PostgreSQL it would
// need a second connection of the pool, which with as many such requests
// in flight as connections none of them gets. It is answered as a store
// that could not answer (503), at once, and logged with this cause.
var errNested = fmt.Errorf("handler: served inside a request that holds a transaction (middleware.Transaction): a receiver begins its own, which would wait for a second connection, or for the writer its request holds; serve it outside middleware.Transaction: %w", writerctx.ErrWriteOutside)

// hiddenConnWarning is the warning for a handler served through a ResponseWriter
// that does not reach the server's connection: an application's wrapper
// without Unwrap, which http.ResponseController cannot see through.
const hiddenConnWarning = "handler: the ResponseWriter does not reach the server's connection (a wrapper without Unwrap() http.ResponseWriter): Body.ReadTimeout cannot apply, so a slow body is bounded by the server's ReadTimeout alone, and the rest of a refused body is not discarded; give the wrapper Unwrap"

// warnHidden logs hiddenConnWarning. Nothing is answered yet: a Logger that
// panics here is dropped, so that the request is answered as it would be
// without the warning.
func (f front) warnHidden(ctx context.Context) {
	defer func() { _ = recover() }()
	f.logger.WarnContext(ctx, hiddenConnWarning)
}

// hidesConn reports whether r came through an http.Server whose
// connection http.ResponseController cannot reach through w: whether
// neither w nor a writer its Unwrap chain leads to has SetReadDeadline.
// It asks as ResponseController does, without setting a deadline. A
// request served with no server (an httptest.ResponseRecorder's) has no
// connection to bound.
func hidesConn(w http.ResponseWriter, r *http.Request) bool {
	if r.Context().Value(http.ServerContextKey) == nil {
		return false
	}
	for {
		switch t := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			return false
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return true
		}
	}
}

// serve serves r through next, then logs and reports the answer. A panic
// in next is reported as 500 internal_error (what middleware.Recover
// answers) and raised again, untouched: this is no recoverer, and
// http.ErrAbortHandler must reach the server as it was. Only a panic in
// next is: the report comes after next returned, outside the recover, so
// a Logger or Hook that panics cannot turn an answered request into a
// failed one (see report). A next that ends its goroutine
// (runtime.Goexit) answered nothing and is not reported; its span, when
// the handler traces, still ends (failed with internal_error).
func (f front) serve(w http.ResponseWriter, r *http.Request, next http.HandlerFunc) {
	ow := &outcomeWriter{ResponseWriter: w}
	r, span := f.startServer(r)
	defer span.EndUnended()
	if v, _, panicked := recovered.Run(func() { next(ow, r) }); panicked {
		ow.status, ow.code, ow.panicked = http.StatusInternalServerError, courier.CodeInternal, true
		f.report(r, ow, span)
		panic(v)
	}
	f.report(r, ow, span)
}

// report logs a refused or failed answer, hands its Event to the hook and
// ends the request's span, once per request. The answer is written by
// then, and the work behind it maybe committed: a panic in the Logger or
// the Hook is dropped, logged once at Error (see unpanicked), so that it
// neither changes the answer nor reports the request again.
func (f front) report(r *http.Request, ow *outcomeWriter, span *tracing.Once) {
	e := ow.event()
	defer endServer(span, e)
	f.unpanicked(r.Context(), e, "Logger", func() { f.log(r, ow, e) })
	if f.hook != nil {
		f.unpanicked(r.Context(), e, "Hook", func() { f.hook(e) })
	}
}

// unpanicked runs fn, the config's Logger or Hook (what) reporting e, and
// drops a panic in it with one line at Error, without the panic's value,
// which may carry anything. If that line panics too (the Logger is what
// panicked), it is dropped silently.
func (f front) unpanicked(ctx context.Context, e Event, what string, fn func()) {
	defer func() {
		if recover() == nil {
			return
		}
		defer func() { _ = recover() }()
		f.logger.ErrorContext(ctx, "handler: "+what+" panicked; the panic was dropped",
			slog.Bool(logkey.Panic, true), slog.Int(logkey.HTTPStatus, e.HTTPStatus), slog.String(logkey.Code, string(e.Code)))
	}()
	fn()
}

// log logs a refused answer at Info and a failed one at Error, but for
// one that failed because its client went away (writerctx.EndedByClient): at Info;
// and for the answers that tell the sender to come back later without
// anything having failed: in_progress (another request is processing the
// notification, as concurrent redeliveries do) and server_busy (the
// bodies in flight at their budget: load shed) at Info: any client can
// bring server_busy about, unsigned, by holding the budget with slow
// uploads, and at Warn, which a part without a Logger passes to
// slog.Default(), each of its requests would write a line there.
func (f front) log(r *http.Request, ow *outcomeWriter, e Event) {
	status, code := slog.Int(logkey.HTTPStatus, e.HTTPStatus), slog.String(logkey.Code, string(e.Code))
	switch {
	case e.HTTPStatus >= 500 && !ow.panicked && writerctx.EndedByClient(r.Context(), ow.cause): // neither the store nor the application failed
		f.logger.InfoContext(r.Context(), "handler: request ended by its client", status, code)
	case e.Code == courier.CodeInProgress && !ow.panicked:
		f.logger.InfoContext(r.Context(), "handler: request answered later, its notification in progress", status, code)
	case e.Code == courier.CodeServerBusy:
		f.logger.InfoContext(r.Context(), "handler: request answered later, the server busy", status, code)
	case e.HTTPStatus >= 500:
		attrs := []any{status, code}
		if why := writerctx.WithCause(r.Context(), ow.cause); why != nil {
			attrs = append(attrs, slog.Any(logkey.Error, why))
		}
		if ow.panicked {
			attrs = append(attrs, slog.Bool(logkey.Panic, true))
		}
		f.logger.ErrorContext(r.Context(), "handler: request failed", attrs...)
	case e.HTTPStatus >= 400:
		f.logger.InfoContext(r.Context(), "handler: request refused", status, code)
	}
}

// outcomeWriter watches a handler's answer: its status, the problem code
// problem.Write tells it, whether it replays a stored answer, and why a
// 5xx failed (for the log line only).
type outcomeWriter struct {
	http.ResponseWriter
	status    int
	code      courier.Code
	duplicate bool
	cause     error
	panicked  bool
}

func (w *outcomeWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *outcomeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// RecordProblemCause implements problem.CauseRecorder: what a part the
// handler runs (middleware.Verify) says a failure came of.
func (w *outcomeWriter) RecordProblemCause(err error) { w.cause = err }

// RecordProblemCode implements problem.CodeRecorder.
func (w *outcomeWriter) RecordProblemCode(code courier.Code) {
	if w.code == "" {
		w.code = code
	}
}

func (w *outcomeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *outcomeWriter) event() Event {
	e := Event{HTTPStatus: w.status, Code: w.code}
	if e.HTTPStatus == 0 { // nothing written: net/http answers 200
		e.HTTPStatus = http.StatusOK
	}
	switch {
	case e.HTTPStatus >= 500:
		e.Outcome = OutcomeFailed
	case e.HTTPStatus >= 300:
		e.Outcome = OutcomeRejected
	case w.duplicate:
		e.Outcome = OutcomeDuplicate
	default:
		e.Outcome = OutcomeAccepted
	}
	return e
}

// markDuplicate notes, when w is watched, that the answer is a replay.
func markDuplicate(w http.ResponseWriter) {
	if ow, ok := w.(*outcomeWriter); ok {
		ow.duplicate = true
	}
}

// noteCause gives the log line of a failed answer its cause.
func noteCause(w http.ResponseWriter, err error) {
	if ow, ok := w.(*outcomeWriter); ok {
		ow.cause = err
	}
}

// newFront checks the fields every handler's config shares and returns
// the front they make, with their defaults applied; name is the config's
// type name, for the error.
func newFront(name string, s *store.Store, v signature.Verifier, body middleware.BodyLimits, logger *slog.Logger, hook func(Event)) (front, error) {
	switch {
	case s == nil:
		return front{}, configError(name + ".Store is required")
	case nilcheck.Nil(v):
		return front{}, configError(name + ".Verifier is required: a handler never accepts unsigned input")
	}
	if err := body.Validate(); err != nil {
		return front{}, fmt.Errorf("handler: %s.Body: %w", name, err)
	}
	return front{verifier: v, body: body, logger: logdefault.Or(logger), hook: hook, tracer: tracerOf(s), hidden: new(atomic.Bool)}, nil
}

func configError(msg string) error {
	return &coded.Error{Code: courier.CodeConfigInvalid, Msg: "handler: " + msg}
}
