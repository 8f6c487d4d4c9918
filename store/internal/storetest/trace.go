package storetest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/store"
)

// testTraceContextTravelsWithTheDelivery: with a Tracer, each delivery an
// Outbox writes (Enqueue, Publish) gets a courier.enqueue span in the
// caller's trace and keeps that span's trace context, which the claim
// returns; a redelivery's enqueue keeps the first; without a Tracer, or
// with a malformed trace context, none is kept and the enqueue succeeds.
func testTraceContextTravelsWithTheDelivery(t *testing.T, open OpenFunc) {
	rec := &tracingtest.Recorder{}
	b := setup(t, open, store.Config{Tracer: rec})
	reqCtx, req := rec.Start(b.ctx, "request", courier.SpanServer)
	req.End()
	root := rec.Inject(reqCtx)
	root.State = "vendor=abc"
	reqCtx = rec.Extract(reqCtx, root)

	enqueue := func(ctx context.Context, p store.EnqueueParams) store.Enqueued {
		t.Helper()
		tx := b.begin(t)
		defer tx.Rollback()
		e, err := b.store.Outbox.Enqueue(ctx, tx, p)
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := enqueue(reqCtx, delivery("n-1"))
	// The same delivery again, from another trace: the row keeps the first.
	other, _ := rec.Start(b.ctx, "another request", courier.SpanServer)
	if again := enqueue(other, delivery("n-1")); !again.Existed {
		t.Fatalf("re-enqueue = %+v, want Existed", again)
	}
	if _, err := b.store.Subscriptions.Create(b.ctx, b.db, subscription("acme", "https://a.example/h", "key-a", "*")); err != nil {
		t.Fatal(err)
	}
	tx := b.begin(t)
	pub, err := b.store.Outbox.Publish(reqCtx, tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "e-1", Payload: []byte(`{"id":"e-1"}`)})
	if err != nil || len(pub) != 1 {
		t.Fatalf("Publish = %v, %v", pub, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	spans := rec.Named(tracing.SpanEnqueue)
	if len(spans) != 3 {
		t.Fatalf("%d enqueue spans, want 3 (enqueue, re-enqueue, publish)", len(spans))
	}
	first := spans[0]
	if first.Parent != root || first.Kind != courier.SpanInternal || !first.Ended() || first.Failed != "" {
		t.Fatalf("enqueue span: parent %v kind %v ended %v failed %q; want a child of the request, internal, ended, not failed",
			first.Parent, first.Kind, first.Ended(), first.Failed)
	}
	attrs := first.Attrs()
	if attrs[tracing.AttrDeliveryID].Int64() != e.ID || attrs[tracing.AttrNotificationID].String() != "n-1" || attrs[tracing.AttrExisted].Bool() {
		t.Fatalf("enqueue span attributes = %v", attrs)
	}
	if !spans[1].Attrs()[tracing.AttrExisted].Bool() {
		t.Fatalf("re-enqueue span attributes = %v, want existed", spans[1].Attrs())
	}

	claimed := b.claim(t, "w", 10, time.Minute)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d, want 2", len(claimed))
	}
	want := map[string]courier.TraceContext{"n-1": first.Context, pub[0].NotificationID: spans[2].Context}
	for _, c := range claimed {
		if c.Trace != want[c.NotificationID] {
			t.Errorf("%s claimed with trace %+v, want its first enqueue span's %+v", c.NotificationID, c.Trace, want[c.NotificationID])
		}
		if c.Trace.State != "vendor=abc" || tracingtest.TraceID(c.Trace) != tracingtest.TraceID(root) {
			t.Errorf("%s: trace %+v is not in the request's trace %+v", c.NotificationID, c.Trace, root)
		}
	}

	// No Tracer, or a tracer whose context is malformed: nothing kept.
	for name, tracer := range map[string]courier.Tracer{
		"none":      nil,
		"malformed": fixedTracer{courier.TraceContext{Parent: "00-zz\r\nX-Injected: 1", State: "a=b"}},
	} {
		b := setup(t, open, store.Config{Tracer: tracer})
		b.enqueue(t, delivery("n-"+name))
		c := b.claim(t, "w", 1, time.Minute)
		if len(c) != 1 || c[0].Trace != (courier.TraceContext{}) {
			t.Errorf("%s: claimed %+v, want one delivery without a trace context", name, c)
		}
	}
}

// fixedTracer injects one trace context whatever the span.
type fixedTracer struct{ tc courier.TraceContext }

func (f fixedTracer) Start(ctx context.Context, name string, kind courier.SpanKind, attrs ...slog.Attr) (context.Context, courier.Span) {
	return (&tracingtest.Recorder{}).Start(ctx, name, kind, attrs...)
}
func (f fixedTracer) Inject(context.Context) courier.TraceContext { return f.tc }
func (f fixedTracer) Extract(ctx context.Context, _ courier.TraceContext) context.Context {
	return ctx
}
