package client_test

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
)

// TestWorkerLogsWhatOperatorsMustSee is the finding "logging that keeps
// its promise": every permanent failure is a Warn line, every retry from
// the third attempt on an Info line, every destination the guard refuses
// a Warn line, each with its codes (code, remote_code, http_status) and
// the endpoint redacted and by its ref; nothing of an endpoint's
// credentials appears, in its userinfo, query or path.
func TestWorkerLogsWhatOperatorsMustSee(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/retry/SECRETPATH":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/reject":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"type":"about:blank","status":400,"code":"validation_failed","detail":"plan missing"}`))
		}
	}, func(c *client.Config) { c.Logger = slog.New(logs) })
	host := strings.TrimPrefix(b.server.URL, "http://")
	endpoints := map[string]string{
		"retry":   "http://user:SECRETPW@" + host + "/retry/SECRETPATH?token=SECRETQ",
		"reject":  "http://" + host + "/reject?token=SECRETQ#frag",
		"refused": "https://user:SECRETPW@10.0.0.1/hooks?token=SECRETQ",
	}
	ids := map[string]int64{}
	for name, ep := range endpoints {
		ids[name] = b.enqueueWith(t, name, func(p *store.EnqueueParams) { p.Endpoint = ep })
	}
	const rounds = 4 // the retried delivery makes four attempts
	for range rounds {
		if _, err := b.worker.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
	}
	if d := b.get(t, ids["retry"]); d.Attempts != rounds || d.Status != courier.StatusRetryWait {
		t.Fatalf("the retried delivery is %s after %d attempts, want retry_wait after %d", d.Status, d.Attempts, rounds)
	}

	type want struct {
		level slog.Level
		attrs map[string]string
	}
	id := func(name string) string { return strconv.FormatInt(ids[name], 10) }
	checks := map[string][]want{
		"worker: delivery failed": {{slog.LevelWarn, map[string]string{
			"delivery": id("reject"), "attempt": "1", "endpoint": "http://" + host + "/…", "endpoint_ref": endpoint.Ref(endpoints["reject"]), "status": "failed",
			"code": "receiver_rejected", "remote_code": "validation_failed", "http_status": "400"}}},
		"worker: destination refused": {{slog.LevelWarn, map[string]string{
			"delivery": id("refused"), "attempt": "1", "endpoint": "https://10.0.0.1/…", "endpoint_ref": endpoint.Ref(endpoints["refused"]), "status": "failed", "code": "destination_forbidden"}}},
		"worker: delivery retrying": {
			{slog.LevelInfo, map[string]string{"delivery": id("retry"), "attempt": "3", "endpoint": "http://" + host + "/…", "endpoint_ref": endpoint.Ref(endpoints["retry"]), "code": "receiver_unavailable", "http_status": "503"}},
			{slog.LevelInfo, map[string]string{"delivery": id("retry"), "attempt": "4", "code": "receiver_unavailable", "http_status": "503"}},
		},
	}
	for msg, wants := range checks {
		got := logs.lines(msg)
		if len(got) != len(wants) {
			t.Errorf("%d lines %q, want %d: %+v", len(got), msg, len(wants), got)
			continue
		}
		for i, w := range wants {
			if got[i].Level != w.level {
				t.Errorf("%q at %v, want %v", msg, got[i].Level, w.level)
			}
			for k, v := range w.attrs {
				if got[i].Attrs[k] != v {
					t.Errorf("%q line %d: %s=%q, want %q (line %+v)", msg, i, k, got[i].Attrs[k], v, got[i].Attrs)
				}
			}
		}
	}
	// The first two attempts of the retried delivery are routine: Debug.
	var routine int
	for _, r := range logs.lines("worker: attempt settled") {
		if r.Attrs["delivery"] == id("retry") {
			routine++
			if r.Level != slog.LevelDebug {
				t.Errorf("routine retry logged at %v", r.Level)
			}
		}
	}
	if routine != 2 {
		t.Errorf("%d routine lines for the first two retries, want 2", routine)
	}
	for _, r := range logs.lines("") {
		for k, v := range r.Attrs {
			if strings.Contains(v, "SECRET") || strings.Contains(v, "user") {
				t.Errorf("%q: %s=%q shows an endpoint credential", r.Message, k, v)
			}
		}
	}
}

// TestWorkerLogsWhyTheGuardRefused: a destination the guard refuses is
// logged with the guard's reason (scheme, port, or the class of the
// address, its own or a redirect's), which says what to open in the
// Guard, and never the endpoint's credentials.
func TestWorkerLogsWhyTheGuardRefused(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://10.0.0.1/elsewhere", http.StatusTemporaryRedirect)
	}, func(c *client.Config) { c.Logger = slog.New(logs) })
	port := b.server.URL[strings.LastIndex(b.server.URL, ":")+1:]
	endpoints := map[string]struct{ url, reason string }{
		"private":  {"https://user:SECRETPW@10.0.0.1/hooks?token=SECRETQ", "destination_forbidden: address is private"},
		"port":     {"http://127.0.0.1:1/hooks/SECRETPATH", "destination_forbidden: port not allowed"},
		"ipv6":     {"http://[::1]:" + port + "/hooks", "destination_forbidden: address is loopback"},
		"redirect": {b.server.URL + "/hooks", "destination_forbidden: address is private"},
	}
	ids := map[string]string{}
	for name, e := range endpoints {
		ids[strconv.FormatInt(b.enqueueWith(t, name, func(p *store.EnqueueParams) { p.Endpoint = e.url }), 10)] = name
	}
	if _, err := b.worker.Work(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := logs.lines("worker: destination refused")
	if len(got) != len(endpoints) {
		t.Fatalf("%d lines %q, want %d: %+v", len(got), "worker: destination refused", len(endpoints), got)
	}
	for _, r := range got {
		name := ids[r.Attrs["delivery"]]
		if want := endpoints[name].reason; r.Attrs["error"] != want {
			t.Errorf("%s: error=%q, want %q (line %+v)", name, r.Attrs["error"], want, r.Attrs)
		}
		for k, v := range r.Attrs {
			if strings.Contains(v, "SECRET") || strings.Contains(v, "user") {
				t.Errorf("%s: %s=%q shows an endpoint credential", name, k, v)
			}
		}
	}
}
