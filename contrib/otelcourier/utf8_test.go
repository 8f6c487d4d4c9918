package otelcourier_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/contrib/otelcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestEveryStringIsUTF8: a span's strings (attributes, status) are valid
// UTF-8 whatever courier hands the Tracer, here the code of a
// handler.Reject that is not (the application cut a sender's word short
// in the middle of a character): OTLP's protobuf encoding refuses such a
// string, and its exporter then drops the whole batch the span was in,
// every other request's spans with it.
func TestEveryStringIsUTF8(t *testing.T) {
	t.Parallel()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := otelcourier.New(otelcourier.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})
	inbox, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "receiver.db"), store.Config{Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inbox.Close() })
	keys := couriertest.StandardWebhooksKeys("shop")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(_ context.Context, _ *sqlx.Tx, o order) error {
			return handler.Reject(courier.Code("bad_"+o.Status[:1]), "") // cut mid-rune: not UTF-8

		})
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, nil)
	t.Cleanup(srv.Close)
	body := []byte(`{"id":"o-1","status":"été"}`)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/hooks", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := keys.Signer.Sign(req, signature.Message{ID: "o-1", Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422", resp.StatusCode)
	}
	spans := exporter.GetSpans()
	if len(find(spans, "POST")) != 1 {
		t.Fatalf("spans %v, want the receiver's POST", names(spans))
	}
	for _, s := range spans {
		if !utf8.ValidString(s.Status.Description) {
			t.Errorf("span %s: status description %q is not UTF-8", s.Name, s.Status.Description)
		}
		for _, kv := range s.Attributes {
			if kv.Value.Type() == attribute.STRING && !utf8.ValidString(kv.Value.AsString()) {
				t.Errorf("span %s: attribute %s = %q is not UTF-8", s.Name, kv.Key, kv.Value.AsString())
			}
		}
	}
}
