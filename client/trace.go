package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/tracing"
)

// claim claims a batch of at most limit deliveries, in a courier.claim
// span when the worker traces. An idle worker claims at every poll and
// finds nothing: after a claim that found nothing, the next claims are
// not traced until one leases something or fails, whose span is started
// once it returned (the claim's own time is not in it). Each idle stretch
// is one span, not one per poll, and no claim that leased or failed goes
// untraced. It is called in the worker's claim turn.
//
// Stop cuts a claim short, one waiting for the database too (SQLite's
// writer held by an application's transaction, a pool at its limit, a
// lock): its transaction rolls back, and nothing is leased. So does the
// Store's Close: a claim waiting in the database would otherwise wait on,
// unaware of it. A claim that fails once the Store is closed, cut short
// or not, fails with the closed Store's error (errClosedClaim), as one
// made after the Close does.
//
// began holds when each of the claim's transactions began, on the
// worker's clock, in order (a delivery's Pass indexes it): after any wait
// for a connection of the pool or for SQLite's writer, and before the
// store stamped that transaction's leases. A reading is zero if the clock
// told no time then (see now).
func (w *Worker) claim(ctx context.Context, limit int) (batch []protocol.Claimed, began []time.Time, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(w.stopCtx, cancel)() //nolint:contextcheck // Stop's context cancels ctx; ctx stays the caller's
	defer context.AfterFunc(w.life, cancel)()    //nolint:contextcheck // so does the Store's Close
	batch, err = w.tracedClaim(ctx, limit, &began)
	if err != nil && w.storeClosed() && !errors.Is(err, protocol.ErrClosed) {
		return nil, began, fmt.Errorf("%w: %w", errClosedClaim, err)
	}
	return batch, began, err
}

// errClosedClaim is the error of a claim that failed once the Store was
// closed: code database_unavailable, with protocol.ErrClosed in its chain.
var errClosedClaim = fmt.Errorf("%w: %w", &coded.Error{Code: courier.CodeDatabaseUnavailable, Msg: "client: claim"}, protocol.ErrClosed)

// tracedClaim is claim's call of the store; began is claim's.
func (w *Worker) tracedClaim(ctx context.Context, limit int, began *[]time.Time) ([]protocol.Claimed, error) {
	if w.tracer == nil {
		return w.outbox.Claim(ctx, w.claimParams(ctx, limit, began))
	}
	var span courier.Span
	if !w.claimsIdle {
		ctx, span = w.tracer.Start(ctx, tracing.SpanClaim, courier.SpanInternal, slog.Int(tracing.AttrBatchLimit, limit))
	}
	batch, err := w.outbox.Claim(ctx, w.claimParams(ctx, limit, began))
	w.claimsIdle = len(batch) == 0 && err == nil
	if span == nil {
		if w.claimsIdle {
			return batch, err
		}
		_, span = w.tracer.Start(ctx, tracing.SpanClaim, courier.SpanInternal, slog.Int(tracing.AttrBatchLimit, limit))
	}
	defer span.End()
	if err != nil {
		span.Fail(w.claimCode(ctx, err))
	}
	span.SetAttributes(slog.Int(tracing.AttrBatchSize, len(batch)))
	return batch, err
}

// claimCode is the code the span of a claim that failed with err, made in
// ctx, fails with: database_unavailable once the Store is closed (see
// claim), worker_stopped for a claim cut short by Stop or by the end of
// its Run's or Work's context (as Work says), err's own otherwise. A claim
// cut short ends with its context's error, which has no code of its own,
// and is no failure of courier's (internal_error).
func (w *Worker) claimCode(ctx context.Context, err error) courier.Code {
	switch {
	case w.storeClosed():
		return courier.CodeDatabaseUnavailable
	case ctx.Err() != nil && courier.CodeOf(err) == "":
		return courier.CodeWorkerStopped
	}
	return tracing.Code(err)
}

// settleSpan wraps a store's Settle in a courier.settle span per batch,
// when t is set.
func settleSpan(t courier.Tracer, settle func(context.Context, ...protocol.Outcome) ([]protocol.Settled, error)) func(context.Context, ...protocol.Outcome) ([]protocol.Settled, error) {
	if t == nil {
		return settle
	}
	return func(ctx context.Context, outcomes ...protocol.Outcome) ([]protocol.Settled, error) {
		ctx, span := t.Start(ctx, tracing.SpanSettle, courier.SpanInternal, slog.Int(tracing.AttrBatchSize, len(outcomes)))
		defer span.End()
		settled, err := settle(ctx, outcomes...)
		if err != nil {
			span.Fail(tracing.Code(err))
		}
		return settled, err
	}
}

// startAttempt starts the span of c's attempt: an HTTP client span, a
// child of the trace context c was enqueued in. Its attributes name the
// endpoint as endpoint.Redact does, and by its ref, never with a
// credential.
func (w *Worker) startAttempt(ctx context.Context, c protocol.Claimed) (context.Context, *tracing.Once) {
	if w.tracer == nil {
		return ctx, nil
	}
	ctx = tracing.Extract(w.tracer, ctx, c.Trace)
	attrs := append(tracing.Server(c.Endpoint),
		slog.String(tracing.AttrHTTPMethod, http.MethodPost),
		slog.String(tracing.AttrURLFull, endpoint.Redact(c.Endpoint)),
		slog.String(tracing.AttrEndpointRef, endpoint.Ref(c.Endpoint)),
		slog.Int64(tracing.AttrDeliveryID, c.DeliveryID),
		slog.String(tracing.AttrNotificationID, c.NotificationID),
		slog.Int(tracing.AttrAttempt, c.Attempt),
	)
	ctx, span := w.tracer.Start(ctx, tracing.SpanHTTP, courier.SpanClient, attrs...)
	return ctx, &tracing.Once{Span: span}
}

// endAttempt records the attempt's outcome on its span and ends it: the
// receiver's status, the result, courier's code and the receiver's own.
// The result is what the attempt came to once settled (see
// settledOutcome), as the Hook's Event has it.
func endAttempt(span *tracing.Once, oc protocol.Outcome, status courier.Status) {
	if span == nil {
		return
	}
	attrs := []slog.Attr{slog.String(tracing.AttrOutcome, string(settledOutcome(oc.Result, status)))}
	if oc.HTTPStatus != 0 {
		attrs = append(attrs, slog.Int(tracing.AttrHTTPStatus, oc.HTTPStatus))
	}
	if oc.Code != "" {
		attrs = append(attrs, slog.String(tracing.AttrCode, string(oc.Code)))
	}
	if oc.RemoteCode != "" {
		attrs = append(attrs, slog.String(tracing.AttrRemoteCode, string(oc.RemoteCode)))
	}
	span.SetAttributes(attrs...)
	if oc.Result != protocol.Succeeded {
		span.Fail(oc.Code)
	}
	span.End()
}

// abandonAttempt ends the span of an attempt whose request was never sent
// (its lease ran short while the request was made ready): not a failure,
// as the delivery is given back uncounted.
func abandonAttempt(span *tracing.Once) {
	if span == nil {
		return
	}
	span.SetAttributes(slog.String(tracing.AttrOutcome, "released"))
	span.End()
}

// traceHeaders sets the attempt's trace context on req: the attempt span's
// when the worker traces, else the one the delivery was enqueued in. No
// signing scheme covers these headers, so they do not change what is
// signed.
func (w *Worker) traceHeaders(ctx context.Context, req *http.Request, c protocol.Claimed) {
	tc := tracing.Inject(w.tracer, ctx)
	if tc.Parent == "" {
		tc = tracing.Check(c.Trace)
	}
	if tc.Parent == "" {
		return
	}
	req.Header.Set(tracing.HeaderParent, tc.Parent)
	if tc.State != "" {
		req.Header.Set(tracing.HeaderState, tc.State)
	}
}
