package handler

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/store"
)

// tracerOf is the tracer of a handler over s: the Store's
// (store.Config.Tracer), nil for none.
func tracerOf(s *store.Store) courier.Tracer {
	if s == nil {
		return nil
	}
	return protocol.InboxFor(s).Tracer()
}

// startServer starts the server span of a request when the handler
// traces, named by its method (see serverSpanName): a child of the span
// ctx already carries (a tracing middleware in front), or else of the
// request's own trace headers, so the receiver continues the sender's
// trace. Of the request, only the method, the scheme and the path as
// shownPath has it are recorded: its path may carry a credential, its
// headers and body are the sender's.
func (f front) startServer(r *http.Request) (*http.Request, *tracing.Once) {
	if f.tracer == nil {
		return r, nil
	}
	ctx := r.Context()
	if tracing.Inject(f.tracer, ctx).Parent == "" {
		ctx = tracing.Extract(f.tracer, ctx, courier.TraceContext{
			Parent: headerField(r.Header, tracing.HeaderParent), State: headerField(r.Header, tracing.HeaderState),
		})
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	method := knownMethod(r.Method)
	ctx, span := f.tracer.Start(ctx, serverSpanName(method), courier.SpanServer,
		slog.String(tracing.AttrHTTPMethod, method), slog.String(tracing.AttrURLScheme, scheme),
		slog.String(tracing.AttrURLPath, shownPath(r.URL.Path)))
	return r.WithContext(ctx), &tracing.Once{Span: span}
}

// headerField is the header name as one field: its lines' values joined
// by commas, as HTTP reads a header sent in several lines. A tracestate
// sent in two lines is one list; a traceparent sent twice is none, as two
// traceparents do not make one.
func headerField(h http.Header, name string) string {
	return strings.Join(h.Values(name), ",")
}

// shownPath is a request's path as its span records it: "/" as it is,
// any other "/…", since a receiver's path may hold a credential (a token
// a sender was given in its endpoint URL).
func shownPath(p string) string {
	if p == "" || p == "/" {
		return "/"
	}
	return "/…"
}

// serverSpanName names a request's span as the HTTP conventions name a
// span without a route: by its method (POST for a sender's), or HTTP for
// a method HTTP does not define.
func serverSpanName(method string) string {
	if method == methodOther {
		return tracing.SpanHTTPOther
	}
	return method
}

// endServer records the answer on the request's span and ends it; a 5xx
// fails it, as the HTTP conventions have servers do.
func endServer(span *tracing.Once, e Event) {
	if span == nil {
		return
	}
	attrs := []slog.Attr{slog.Int(tracing.AttrHTTPStatus, e.HTTPStatus), slog.String(tracing.AttrOutcome, string(e.Outcome))}
	if e.Code != "" {
		attrs = append(attrs, slog.String(tracing.AttrCode, string(e.Code)))
	}
	span.SetAttributes(attrs...)
	if e.HTTPStatus >= 500 {
		span.Fail(e.Code)
	}
	span.End()
}

// knownMethod is the method as the HTTP conventions record it: one of
// HTTP's own, or _OTHER, so a client cannot fill the attribute.
func knownMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return methodOther
}

// methodOther is the method recorded for one HTTP does not define.
const methodOther = "_OTHER"

// runFunc runs the application's function fn in a courier.handle span when
// t is set. The span fails with the refusal's code for a rejection (Reject),
// handler_failed for another error (but one that ok, if not nil, takes for
// success: Source's ErrAlreadyApplied), internal_error for a panic (raised
// again).
func runFunc(t courier.Tracer, ctx context.Context, ok func(error) bool, fn func(context.Context) error) error {
	if t == nil {
		return fn(ctx)
	}
	ctx, span := t.Start(ctx, tracing.SpanHandle, courier.SpanInternal)
	ended := false
	defer func() {
		if !ended {
			span.Fail(courier.CodeInternal)
			span.End()
		}
	}()
	err := fn(ctx)
	var rej *rejection
	switch {
	case err == nil, ok != nil && ok(err):
	case errors.As(err, &rej):
		span.Fail(rej.code)
	default:
		span.Fail(courier.CodeHandlerFailed)
	}
	ended = true
	span.End()
	return err
}
