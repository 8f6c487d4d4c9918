package prometheus_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/prometheus"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestScrapeAgreesWithStores runs deliveries through a receiver that
// answers every first attempt 503, then scrapes the metrics and compares
// them with what both databases say happened.
func TestScrapeAgreesWithStores(t *testing.T) {
	t.Parallel()
	m := prometheus.New()
	ctx := t.Context()
	dir := t.TempDir()
	sender, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{Hook: m.StoreHook,
		Breaker: store.BreakerConfig{Threshold: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	receiver, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close()
	key, _ := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	signer, _ := signature.NewStandardWebhooksSigner(signature.StandardWebhooksSignerConfig{Keys: []signature.StandardWebhooksKey{key}})
	verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "s", Keys: []signature.StandardWebhooksKey{key}})
	rcv, err := handler.NewTerminal(handler.ReceiverConfig{Store: receiver, Verifier: verifier, Hook: m.ReceiverHook},
		func(context.Context, *sqlx.Tx, ack.Terminal) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		first := seen[r.Header.Get("webhook-id")] == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rcv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	w, err := client.NewWorker(client.Config{Store: sender, Signer: signer, Hook: m.WorkerHook,
		Backoff:   client.ExponentialBackoff(1, 1, 0),
		Transport: client.Guard{AllowHTTP: true, AllowPorts: []uint16{uint16(port)}, AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}.Transport()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	tx, _ := sender.DB().BeginTxx(ctx, nil)
	for i := range n {
		note, _ := ack.NewTerminal(ack.Terminal{EventID: fmt.Sprintf("e-%d", i), SiteID: "s", PlanID: "p", WebsiteVersion: "v",
			SourceSequence: "1", JobCount: 1, ChangeSHA256: ack.Digest(nil), LifecycleBindingSHA256: ack.Digest(nil), TerminalStatus: "cancelled"})
		payload, _ := note.Payload()
		if _, err := sender.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: note.NotificationID, Endpoint: srv.URL, Payload: payload, Profile: ack.ProfileTerminal}); err != nil {
			t.Fatal(err)
		}
	}
	tx.Commit()
	for {
		h, _ := sender.Outbox.Health(ctx)
		if h.Counts[courier.StatusSucceeded] == n {
			break
		}
		if _, err := w.Work(ctx); err != nil {
			t.Fatal(err)
		}
	}

	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("Content-Type %q", ct)
	}
	scrape := parse(t, rec.Body)
	var attempts, inbox int
	sender.DB().Get(&attempts, "SELECT COUNT(*) FROM courier_attempts")
	receiver.DB().Get(&inbox, "SELECT COUNT(*) FROM courier_inbox WHERE status = 'completed'")
	h, _ := sender.Outbox.Health(ctx)
	checks := []struct {
		name      string
		got, want float64
	}{
		{"enqueued", scrape[`courier_enqueued_total`], n},
		{"claimed = attempts log", scrape[`courier_claimed_total`], float64(attempts)},
		{"settled succeeded = store", scrape[`courier_settled_total{status="succeeded"}`], float64(h.Counts[courier.StatusSucceeded])},
		{"settled retry_wait = 503s", scrape[`courier_settled_total{status="retry_wait"}`], n},
		{"attempts = attempts log", sum(scrape, "courier_attempts_total{"), float64(attempts)},
		{"histogram count = attempts", sum(scrape, "courier_attempt_duration_seconds_count{"), float64(attempts)},
		{"succeeded attempts", scrape[`courier_attempts_total{result="succeeded",code=""}`], n},
		{"retried attempts", scrape[`courier_attempts_total{result="retry",code="receiver_unavailable"}`], n},
		{"receiver accepted = inbox", scrape[`courier_receiver_requests_total{outcome="accepted",code=""}`], float64(inbox)},
		{"+Inf bucket = count", scrape[`courier_attempt_duration_seconds_bucket{result="succeeded",le="+Inf"}`], n},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: scrape says %v, want %v\n%s", c.name, c.got, c.want, rec.Body.String())
		}
	}
}

// parse reads "series value" lines.
func parse(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func sum(m map[string]float64, prefix string) float64 {
	var s float64
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			s += v
		}
	}
	return s
}
