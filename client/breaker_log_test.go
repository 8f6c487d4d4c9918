package client_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
)

// TestWorkerLogsItsEndpointsBreakers: with no store.Config.Hook wired, the
// worker's Logger alone tells an operator that an endpoint's breaker
// opened (Warn, with its reason and until when), that it closed again
// (Info) and that one was disabled (Warn): one line for each move, not one
// per delivery, although more deliveries fail while it is open; its first
// probe failing is a Debug line. Each names the endpoint redacted and by
// its ref, none of its credentials shown.
func TestWorkerLogsItsEndpointsBreakers(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	var healthy atomic.Bool
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.HasPrefix(r.URL.Path, "/gone"):
			w.WriteHeader(http.StatusGone)
		case !healthy.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
		}
	}, func(c *client.Config) { c.Logger = slog.New(logs) })
	host := strings.TrimPrefix(b.server.URL, "http://")
	flaky := "http://user:SECRETPW@" + host + "/hook/SECRETPATH?token=SECRETQ"
	gone := "http://user:SECRETPW@" + host + "/gone?token=SECRETQ"
	const n = 6 // the breaker opens at its default threshold, the fifth failure in a row
	for i := range n {
		b.enqueueWith(t, fmt.Sprintf("flaky-%d", i), func(p *store.EnqueueParams) { p.Endpoint = flaky })
	}
	b.enqueueWith(t, "gone-0", func(p *store.EnqueueParams) { p.Endpoint = gone })
	b.enqueueWith(t, "gone-1", func(p *store.EnqueueParams) { p.Endpoint = gone })

	work := func() {
		t.Helper()
		if _, err := b.worker.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	work() // every delivery fails: the flaky endpoint opens, the gone one is disabled
	opened, err := b.store.Endpoints.Get(t.Context(), flaky)
	if err != nil || opened.State != store.EndpointOpen {
		t.Fatalf("flaky endpoint %s, %v; want open", opened.State, err)
	}
	b.clock.Advance(time.Minute) // its cool-down is over: the probe fails, it opens again
	work()
	healthy.Store(true)
	for range 5 { // the next probe succeeds: it closes, and the rest follow
		b.clock.Advance(time.Minute)
		work()
	}
	if h, _ := b.store.Endpoints.Get(t.Context(), flaky); h.State != store.EndpointClosed {
		t.Fatalf("flaky endpoint %s after it recovered, want closed", h.State)
	}

	type want struct {
		level slog.Level
		attrs map[string]string
	}
	checks := map[string]want{
		"worker: endpoint's breaker opened, its deliveries paused": {slog.LevelWarn, map[string]string{
			"endpoint": "http://" + host + "/…", "endpoint_ref": endpoint.Ref(flaky), "code": "receiver_unavailable",
			"open_until": slog.TimeValue(opened.OpenUntil).String()}},
		"worker: endpoint's breaker closed, its deliveries resumed": {slog.LevelInfo, map[string]string{
			"endpoint": "http://" + host + "/…", "endpoint_ref": endpoint.Ref(flaky)}},
		"worker: endpoint disabled by its breaker, until an operator enables it": {slog.LevelWarn, map[string]string{
			"endpoint": "http://" + host + "/…", "endpoint_ref": endpoint.Ref(gone), "code": string(courier.CodeEndpointGone)}},
		"worker: endpoint's probe failed, its breaker open again": {slog.LevelDebug, map[string]string{
			"endpoint": "http://" + host + "/…", "endpoint_ref": endpoint.Ref(flaky), "code": "receiver_unavailable"}},
	}
	for msg, w := range checks {
		got := logs.lines(msg)
		if len(got) != 1 {
			t.Errorf("%d lines %q, want 1: %+v", len(got), msg, got)
			continue
		}
		if got[0].Level != w.level {
			t.Errorf("%q at %v, want %v", msg, got[0].Level, w.level)
		}
		for k, v := range w.attrs {
			if got[0].Attrs[k] != v {
				t.Errorf("%q: %s=%q, want %q (line %+v)", msg, k, got[0].Attrs[k], v, got[0].Attrs)
			}
		}
	}
	for _, r := range logs.lines("") {
		for k, v := range r.Attrs {
			if strings.Contains(v, "SECRET") || strings.Contains(v, "user") {
				t.Errorf("%q: %s=%q shows an endpoint credential", r.Message, k, v)
			}
		}
	}
}
