package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// tracedOrder is a receiver's notification type in the tracing tests.
type tracedOrder struct {
	ID string `json:"id" validate:"required,courier_token"`
}

func (o tracedOrder) DedupeKey() string { return o.ID }

// traceBundle is a traced sender and a courier receiver behind a front
// that records each request's traceparent and answers the first with 503.
type traceBundle struct {
	rec     *tracingtest.Recorder
	sender  *store.Store
	path    string // the sender's database
	srv     *httptest.Server
	mu      sync.Mutex
	parents []string // traceparent of each request, in order
	applied chan struct{}
}

func setupTrace(t *testing.T, keys func(origin string) couriertest.Keys, fail503First bool) (*traceBundle, couriertest.Keys) {
	t.Helper()
	b := &traceBundle{rec: &tracingtest.Recorder{}, applied: make(chan struct{}, 10)}
	var err error
	b.path = filepath.Join(t.TempDir(), "sender.db")
	b.sender, err = sqlite.Open(t.Context(), b.path, store.Config{Tracer: b.rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.sender.Close() })
	inbox, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "receiver.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inbox.Close() })
	var rcv http.Handler
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.parents = append(b.parents, r.Header.Get("traceparent"))
		n := len(b.parents)
		b.mu.Unlock()
		if fail503First && n == 1 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"code":"receiver_busy"}`))
			return
		}
		rcv.ServeHTTP(w, r)
	}))
	b.srv.Start()
	t.Cleanup(b.srv.Close)
	k := keys(b.srv.URL)
	rcv, err = handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: k.Verifier},
		func(context.Context, *sqlx.Tx, tracedOrder) error { b.applied <- struct{}{}; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return b, k
}

// enqueue enqueues one notification to endpoint inside a span of its own,
// and returns that span and the enqueue span.
func (b *traceBundle) enqueue(t *testing.T, endpoint string) (request, enqueue *tracingtest.Span) {
	t.Helper()
	ctx, span := b.rec.Start(t.Context(), "request", courier.SpanServer)
	defer span.End()
	tx, err := b.sender.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := b.sender.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: endpoint, Payload: []byte(`{"id":"o-1"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return span.(*tracingtest.Span), b.rec.Named(tracing.SpanEnqueue)[0]
}

// drain delivers the sender's outbox with a worker over the sender's
// Store, which traces, or with traced false over a second Store on the
// same database that does not: a worker process without a tracer.
func (b *traceBundle) drain(t *testing.T, k couriertest.Keys, traced bool) {
	t.Helper()
	s := b.sender
	if !traced {
		var err error
		if s, err = sqlite.Open(t.Context(), b.path, store.Config{}); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: k.Signer,
		Transport: couriertest.Guard(b.srv.URL).Transport(), Backoff: func(int, time.Duration) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(t.Context(), w); err != nil {
		t.Fatal(err)
	}
}

// TestAttemptSpansContinueTheEnqueuedTrace: each attempt is an HTTP client
// span, a child of the delivery's enqueue span, whose attributes follow
// the HTTP semantic conventions with the URL redacted and courier's
// outcome and codes; each request carries its attempt span's traceparent;
// claims and settles have spans of their own; and no attribute holds the
// payload or a credential of the endpoint.
func TestAttemptSpansContinueTheEnqueuedTrace(t *testing.T) {
	t.Parallel()
	b, k := setupTrace(t, func(string) couriertest.Keys { return couriertest.StandardWebhooksKeys("s") }, true)
	hook := strings.Replace(b.srv.URL, "http://", "http://user:pa55word@", 1) + "/hooks?token=s3cret"
	request, enq := b.enqueue(t, hook)
	if enq.Parent != request.Context {
		t.Fatalf("enqueue span's parent = %v, want the request's %v", enq.Parent, request.Context)
	}
	b.drain(t, k, true)
	<-b.applied

	var attempts []*tracingtest.Span
	for _, s := range b.rec.Named(tracing.SpanHTTP) {
		if s.Kind == courier.SpanClient {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 2 || len(b.parents) != 2 {
		t.Fatalf("%d attempt spans, %d requests; want 2 of each", len(attempts), len(b.parents))
	}
	host := strings.TrimPrefix(b.srv.URL, "http://")
	for i, s := range attempts {
		a := s.Attrs()
		if s.Parent != enq.Context || !s.Ended() {
			t.Errorf("attempt %d: parent %v (ended %v), want the enqueue span %v", i+1, s.Parent, s.Ended(), enq.Context)
		}
		if b.parents[i] != s.Context.Parent {
			t.Errorf("request %d sent traceparent %q, want its attempt span's %q", i+1, b.parents[i], s.Context.Parent)
		}
		if a[tracing.AttrHTTPMethod].String() != "POST" || a[tracing.AttrURLFull].String() != b.srv.URL+"/…" || a[tracing.AttrEndpointRef].String() != endpoint.Ref(hook) ||
			a[tracing.AttrServerAddress].String()+":"+fmt.Sprint(a[tracing.AttrServerPort].Int64()) != host ||
			a[tracing.AttrAttempt].Int64() != int64(i+1) || a[tracing.AttrNotificationID].String() != "o-1" || a[tracing.AttrDeliveryID].Int64() == 0 {
			t.Errorf("attempt %d attributes = %v", i+1, a)
		}
	}
	first, second := attempts[0].Attrs(), attempts[1].Attrs()
	if first[tracing.AttrHTTPStatus].Int64() != 503 || first[tracing.AttrOutcome].String() != "retry" ||
		first[tracing.AttrCode].String() == "" || first[tracing.AttrRemoteCode].String() != "receiver_busy" || attempts[0].Failed == "" {
		t.Errorf("attempt 1 (503): attributes %v, failed %q", first, attempts[0].Failed)
	}
	if second[tracing.AttrHTTPStatus].Int64() != 200 || second[tracing.AttrOutcome].String() != "succeeded" || attempts[1].Failed != "" {
		t.Errorf("attempt 2 (200): attributes %v, failed %q", second, attempts[1].Failed)
	}
	claims, settles := b.rec.Named(tracing.SpanClaim), b.rec.Named(tracing.SpanSettle)
	if len(claims) < 2 || claims[0].Attrs()[tracing.AttrBatchSize].Int64() != 1 || len(settles) != 2 || settles[0].Attrs()[tracing.AttrBatchSize].Int64() != 1 {
		t.Errorf("%d claim spans, %d settle spans; want a claim per round and a settle per attempt", len(claims), len(settles))
	}
	for _, s := range b.rec.Spans() {
		text := fmt.Sprint(s.Attrs())
		for _, secret := range []string{"s3cret", "pa55word", "user", `"id"`} {
			if strings.Contains(text, secret) {
				t.Errorf("span %s holds %q: %s", s.Name, secret, text)
			}
		}
	}
}

// TestAttemptsSendTheStoredTraceContextWithoutATracer: a worker that does
// not trace still sends the trace context the delivery was enqueued in,
// so the receiver continues the enqueuing trace.
func TestAttemptsSendTheStoredTraceContextWithoutATracer(t *testing.T) {
	t.Parallel()
	b, k := setupTrace(t, func(string) couriertest.Keys { return couriertest.StandardWebhooksKeys("s") }, true)
	_, enq := b.enqueue(t, b.srv.URL+"/hooks")
	b.drain(t, k, false)
	<-b.applied
	if len(b.parents) != 2 || b.parents[0] != enq.Context.Parent || b.parents[1] != enq.Context.Parent {
		t.Fatalf("requests carried traceparent %q, want the enqueue span's %q on both", b.parents, enq.Context.Parent)
	}
}

// TestTraceHeadersLeaveEverySignatureValid: the trace headers are set on
// every attempt and covered by no signing scheme, so each scheme's
// receiver still verifies and accepts the delivery.
func TestTraceHeadersLeaveEverySignatureValid(t *testing.T) {
	t.Parallel()
	schemes := map[string]func(origin string) couriertest.Keys{
		"standard-webhooks": func(string) couriertest.Keys { return couriertest.StandardWebhooksKeys("s") },
		"rfc9421":           func(origin string) couriertest.Keys { return couriertest.RFC9421Keys("s", origin) },
		"adcp-hmac":         func(string) couriertest.Keys { return couriertest.AdCPHMACKeys("s") },
		"bearer":            func(string) couriertest.Keys { return couriertest.BearerKeys("s") },
	}
	for name, keys := range schemes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, k := setupTrace(t, keys, false)
			b.enqueue(t, b.srv.URL+"/hooks")
			b.drain(t, k, true)
			d, err := b.sender.Outbox.Lookup(t.Context(), "o-1", b.srv.URL+"/hooks")
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != courier.StatusSucceeded || len(b.parents) != 1 || b.parents[0] == "" {
				t.Fatalf("delivery %s (%s) after %d requests with traceparent %q; want succeeded at once, traced",
					d.Status, d.LastErrorCode, len(b.parents), b.parents)
			}
			<-b.applied
		})
	}
}

// TestAnIdleWorkerDoesNotTraceEveryPoll: a worker with nothing to deliver
// claims at every poll; each claim was a trace of its own, so an idle
// worker sent one empty trace per PollInterval, forever. It traces the
// first claim that finds nothing and then none until one leases something
// or fails: those are traced still.
func TestAnIdleWorkerDoesNotTraceEveryPoll(t *testing.T) {
	t.Parallel()
	b, k := setupTrace(t, func(string) couriertest.Keys { return couriertest.StandardWebhooksKeys("s") }, false)
	w, err := client.NewWorker(client.Config{Store: b.sender, Signer: k.Signer, PollInterval: 10 * time.Millisecond,
		Transport: couriertest.Guard(b.srv.URL).Transport()})
	if err != nil {
		t.Fatal(err)
	}
	waits := make(chan struct{}, 100)
	client.SetAwaiting(w, func() { waits <- struct{}{} })
	awaitPolls := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-waits:
			case <-time.After(guardTimeout):
				t.Fatalf("gave up waiting for %d polls", n)
			}
		}
	}
	// A claim in flight when stop cancels the Run is cut short and traced
	// as failed with worker_stopped; only failures of any other code
	// count as failed here.
	claims := func() (empty, leased, failed int) {
		for _, s := range b.rec.Named(tracing.SpanClaim) {
			switch {
			case s.Failed == courier.CodeWorkerStopped:
			case s.Failed != "":
				failed++
			case s.Attrs()[tracing.AttrBatchSize].Int64() > 0:
				leased++
			default:
				empty++
			}
		}
		return empty, leased, failed
	}
	stop := runWorker(t, w)
	awaitPolls(20)
	if empty, _, _ := claims(); empty > 1 {
		t.Errorf("an idle worker traced %d claims that found nothing, want at most one", empty)
	}

	b.enqueue(t, b.srv.URL+"/hooks")
	<-b.applied
	awaitPolls(20)
	stop()
	if _, leased, _ := claims(); leased != 1 {
		t.Errorf("%d traced claims leased the delivery, want 1", leased)
	}

	if err := b.sender.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Work(t.Context()); err == nil {
		t.Fatal("Work on a closed Store succeeded")
	}
	if _, _, failed := claims(); failed != 1 {
		t.Errorf("%d traced claims failed other than cut short by stop, want the one on the closed Store", failed)
	}
	if empty, _, _ := claims(); empty > 2 {
		t.Errorf("%d traced claims found nothing, want at most one per idle stretch (two)", empty)
	}
}

// goexitSigner ends the goroutine that signs with it (runtime.Goexit, as
// t.FailNow does).
type goexitSigner struct{}

func (goexitSigner) Sign(*http.Request, signature.Message) error {
	runtime.Goexit()
	return nil
}

// TestAnAttemptSpanEndsWhenItsGoroutineEnds: a callback of the worker's
// configuration (here the Signer) that ends the attempt's goroutine
// (runtime.Goexit) ends the attempt's span too, failed with
// internal_error: a span never ended is never exported, and the trace
// loses the attempt.
func TestAnAttemptSpanEndsWhenItsGoroutineEnds(t *testing.T) {
	t.Parallel()
	b, _ := setupTrace(t, func(string) couriertest.Keys { return couriertest.StandardWebhooksKeys("s") }, false)
	b.enqueue(t, b.srv.URL+"/hooks")
	w, err := client.NewWorker(client.Config{Store: b.sender, Signer: goexitSigner{}, Transport: couriertest.Guard(b.srv.URL).Transport()})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want the one attempt", n, err)
	}
	attempts := b.rec.Named(tracing.SpanHTTP)
	if len(attempts) != 1 || !attempts[0].Ended() || attempts[0].Failed != courier.CodeInternal {
		for _, s := range attempts {
			t.Logf("attempt span: ended %v, failed %q", s.Ended(), s.Failed)
		}
		t.Fatalf("%d attempt spans; want one, ended and failed with internal_error", len(attempts))
	}
}

// claimStarts is a Recorder that tells of each claim span as it starts.
type claimStarts struct {
	*tracingtest.Recorder
	started chan struct{}
}

func (c claimStarts) Start(ctx context.Context, name string, kind courier.SpanKind, attrs ...slog.Attr) (context.Context, courier.Span) {
	if name == tracing.SpanClaim {
		select {
		case c.started <- struct{}{}:
		default:
		}
	}
	return c.Recorder.Start(ctx, name, kind, attrs...)
}

// TestAClaimCutShortIsTracedAsWhatCutItShort: a claim waiting for the
// database (here for SQLite's writer, which an application's transaction
// holds) when the worker is stopped, or its Store closed, ends its span
// failed with worker_stopped, or with the closed Store's
// database_unavailable, as Work and Run say; not internal_error, which
// tells an operator that courier itself went wrong, at every deploy.
func TestAClaimCutShortIsTracedAsWhatCutItShort(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cut  func(*client.Worker, *store.Store) error
		want courier.Code
	}{
		{"Stop", func(w *client.Worker, _ *store.Store) error { return w.Stop(context.Background()) }, courier.CodeWorkerStopped},
		{"Close", func(_ *client.Worker, s *store.Store) error { return s.Close() }, courier.CodeDatabaseUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := claimStarts{&tracingtest.Recorder{}, make(chan struct{}, 1)}
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sender.db"), store.Config{Tracer: rec})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			tx, err := s.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: "https://receiver.example/hooks", Payload: []byte(`{"id":"o-1"}`)}); err != nil {
				t.Fatal(err)
			}
			// tx holds the writer until the end: the claim waits for it.
			w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("s").Signer, PollInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- w.Run(t.Context()) }()
			waitFor(t, rec.started, "the claim")
			if err := tt.cut(w, s); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(guardTimeout):
				t.Fatal("gave up waiting for Run to end")
			}
			_ = tx.Rollback()
			claims := rec.Named(tracing.SpanClaim)
			if len(claims) != 1 || !claims[0].Ended() || claims[0].Failed != tt.want {
				for _, c := range claims {
					t.Logf("claim span: ended %v, failed %q", c.Ended(), c.Failed)
				}
				t.Fatalf("%d claim spans; want one, failed with %s", len(claims), tt.want)
			}
		})
	}
}

// TestTheLastAttemptSpanSaysTheDeliveryFailed: an attempt the receiver
// answers 503, the delivery's last, fails the delivery; its span's outcome
// says so, as the Hook's Event and the log line do, not retry.
func TestTheLastAttemptSpanSaysTheDeliveryFailed(t *testing.T) {
	t.Parallel()
	b, k := setupTrace(t, func(string) couriertest.Keys { return couriertest.StandardWebhooksKeys("s") }, true)
	if _, err := b.sender.Outbox.Enqueue(t.Context(), b.sender.DB(), store.EnqueueParams{
		NotificationID: "o-1", Endpoint: b.srv.URL + "/hooks", Payload: []byte(`{"id":"o-1"}`), MaxAttempts: 1,
	}); err != nil {
		t.Fatal(err)
	}
	var events []client.Event
	w, err := client.NewWorker(client.Config{Store: b.sender, Signer: k.Signer, Transport: couriertest.Guard(b.srv.URL).Transport(),
		Hook: func(e client.Event) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want the one attempt", n, err)
	}
	attempts := b.rec.Named(tracing.SpanHTTP)
	if len(attempts) != 1 || len(events) != 1 || events[0].Status != courier.StatusFailed {
		t.Fatalf("%d attempt spans, events %+v; want one of each, the delivery failed", len(attempts), events)
	}
	a := attempts[0].Attrs()
	if got := a[tracing.AttrOutcome].String(); got != string(events[0].Outcome) || got != "failed" || !attempts[0].Ended() || attempts[0].Failed == "" {
		t.Errorf("attempt span: outcome %q (the Event's %q), ended %v, failed %q; want failed, ended and failed", got, events[0].Outcome, attempts[0].Ended(), attempts[0].Failed)
	}
}

// panickingTracer panics in every method, as a broken Tracer of the
// application's may, and so does every span it would start.
type panickingTracer struct{}

func (panickingTracer) Start(context.Context, string, courier.SpanKind, ...slog.Attr) (context.Context, courier.Span) {
	panic("tracer: Start")
}
func (panickingTracer) Inject(context.Context) courier.TraceContext { panic("tracer: Inject") }
func (panickingTracer) Extract(context.Context, courier.TraceContext) context.Context {
	panic("tracer: Extract")
}

// TestAPanickingTracerTracesNothing: a Tracer that panics in every method,
// on the sender's Store and the receiver's, traces nothing and ends
// nothing: the enqueue commits, the worker's attempt (on a goroutine of
// its own, where a panic would end the process) delivers, the receiver
// runs the function once, and each panic is logged at Error on slog's
// default logger, as a Hook's is.
func TestAPanickingTracerTracesNothing(t *testing.T) {
	logs := logtest.AsDefault(t)
	ctx := t.Context()
	sender, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sender.db"), store.Config{Tracer: panickingTracer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	inbox, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "receiver.db"), store.Config{Tracer: panickingTracer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer inbox.Close()
	applied := 0
	var rcv http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rcv.ServeHTTP(w, r) }))
	defer srv.Close()
	k := couriertest.StandardWebhooksKeys("orders")
	rcv, err = handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: k.Verifier},
		func(context.Context, *sqlx.Tx, tracedOrder) error { applied++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sender.Outbox.Enqueue(ctx, sender.DB(), store.EnqueueParams{NotificationID: "o-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{"id":"o-1"}`)}); err != nil {
		t.Fatalf("enqueue with a panicking Tracer: %v", err)
	}
	w, err := client.NewWorker(client.Config{Store: sender, Signer: k.Signer, Transport: couriertest.Guard(srv.URL).Transport()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	if d, err := sender.Outbox.Lookup(ctx, "o-1", srv.URL+"/hooks"); err != nil || d.Status != courier.StatusSucceeded || applied != 1 {
		t.Fatalf("delivery %+v (%v), function ran %d times; want succeeded, once", d, err, applied)
	}
	panics := 0
	for _, m := range logs.Messages(slog.LevelError) {
		if strings.HasPrefix(m, "store: Tracer ") && strings.HasSuffix(m, " panicked; the panic was dropped") {
			panics++
		}
	}
	if panics < 4 { // at least the enqueue's Start, the claim's, the attempt's and the receiver's
		t.Errorf("%d Tracer panics logged at Error, want one per call that panicked:\n%s", panics, strings.Join(logs.Messages(slog.LevelError), "\n"))
	}
}
