package handler_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/middleware"
)

// statusLogger is the logging middleware most services have: it wraps the
// ResponseWriter to see the status, and has no Unwrap.
type statusLogger struct {
	http.ResponseWriter
	status int
}

func (w *statusLogger) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// unwrappingLogger is the same middleware written as http.ResponseController
// expects, with Unwrap.
type unwrappingLogger struct{ statusLogger }

func (w *unwrappingLogger) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// tenantKey is the application's own context key, set by its router.
type tenantKey struct{}

// TestReceiverWarnsOnceWhenItsWriterHidesTheConnection: Body.ReadTimeout
// is a deadline on the connection, which a receiver reaches through
// http.ResponseController. Mounted inside an application's middleware
// whose ResponseWriter wrapper has no Unwrap, the receiver could not set
// it and said nothing: a body trickling in was read for as long as the
// server's own ReadTimeout allowed (for ever without one), never answered
// 408, and the team had no way to know its bound was off. The receiver now
// says so on its Logger, once, at Warn; behind a wrapper with Unwrap it
// says nothing.
func TestReceiverWarnsOnceWhenItsWriterHidesTheConnection(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		wrap  func(http.ResponseWriter) http.ResponseWriter
		http2 bool
		warn  bool
	}{
		// Served alone, over HTTP/2: its writer sets read deadlines too.
		{"HTTP/2, no wrapper", func(w http.ResponseWriter) http.ResponseWriter { return w }, true, false},
		{"wrapper without Unwrap", func(w http.ResponseWriter) http.ResponseWriter { return &statusLogger{ResponseWriter: w} }, false, true},
		{"wrapper with Unwrap", func(w http.ResponseWriter) http.ResponseWriter {
			return &unwrappingLogger{statusLogger{ResponseWriter: w}}
		}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openSQLiteStore(t)
			verifier, signer := standardWebhooksFor(t, "billing")
			logs := &syncBuffer{}
			rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier, Logger: slog.New(slog.NewTextHandler(logs, nil))},
				func(context.Context, *sqlx.Tx, svixEvent) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rcv.ServeHTTP(tt.wrap(w), r)
			}))
			if tt.http2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			for _, id := range []string{"msg-1", "msg-2"} {
				resp, out := postSigned(t, srv, signer, id, []byte(`{"type":"invoice.paid","data":{}}`), false)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %s", id, resp.StatusCode, out)
				}
				if tt.http2 && resp.ProtoMajor != 2 {
					t.Fatalf("%s: served over %s, want HTTP/2", id, resp.Proto)
				}
			}
			warned := strings.Count(logs.String(), "level=WARN")
			switch {
			case tt.warn && warned != 1:
				t.Fatalf("behind a wrapper without Unwrap the receiver logged %d warnings, want 1:\n%s", warned, logs)
			case tt.warn && !strings.Contains(logs.String(), "Unwrap"):
				t.Fatalf("the warning does not say what to add:\n%s", logs)
			case !tt.warn && warned != 0:
				t.Fatalf("behind a wrapper with Unwrap the receiver warned:\n%s", logs)
			}
		})
	}
}

// TestReceiverFunctionContextIsTheRequests: the function's ctx is the
// request's, so it carries what the application's own middleware put there
// (a tenant from the route) and the verified sender, whose MessageID is the
// key a payload without an id of its own is recorded under: the function
// can keep it beside its effects.
func TestReceiverFunctionContextIsTheRequests(t *testing.T) {
	t.Parallel()
	s := openSQLiteStore(t)
	verifier, signer := standardWebhooksFor(t, "billing")
	type seen struct {
		tenant, sender, messageID string
	}
	got := make(chan seen, 1)
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier},
		func(ctx context.Context, _ *sqlx.Tx, _ svixEvent) error {
			p, _ := middleware.PrincipalFromContext(ctx)
			tenant, _ := ctx.Value(tenantKey{}).(string)
			got <- seen{tenant: tenant, sender: p.Sender, messageID: p.MessageID}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /hooks/{tenant}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rcv.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, r.PathValue("tenant"))))
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	srv.URL += "/hooks/acme"
	resp, out := postSigned(t, srv, signer, "msg-7", []byte(`{"type":"invoice.paid","data":{}}`), false)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if s := <-got; s != (seen{tenant: "acme", sender: "billing", messageID: "msg-7"}) {
		t.Fatalf("the function saw %+v", s)
	}
}
