package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
)

// benchPayload is the body of the deliveries filled in bulk: the same
// bytes for every row, each delivery with its own notification id.
var benchPayload = []byte(`{"amount":1250,"currency":"EUR","event":"order.paid","notification_id":"n","schema":"courier.bench.v1"}`)

// note is the notification the courier receivers accept: courier's own
// Ack profile, deduped by notification_id, validated like any payload.
type note struct {
	Schema         string `json:"schema" validate:"eq=courier.bench.v1"`
	NotificationID string `json:"notification_id" validate:"courier_token"`
	Event          string `json:"event" validate:"required,max=64"`
	Amount         int64  `json:"amount" validate:"gte=0"`
	Currency       string `json:"currency" validate:"len=3"`
}

// DedupeKey implements ack.Notification.
func (n note) DedupeKey() string { return n.NotificationID }

// outgoing is one request a load loop sends.
type outgoing struct {
	id     string
	body   []byte
	header http.Header // sent as is; nil means Content-Type and webhook-id only
}

// bareRequests returns the requests of a bare POST loop: the bodies, each
// with its notification id in webhook-id, unsigned.
func bareRequests(ids []string, body func(i int) []byte) []outgoing {
	out := make([]outgoing, len(ids))
	for i, id := range ids {
		out[i] = outgoing{id: id, body: body(i)}
	}
	return out
}

// signedRequests returns the requests with Standard Webhooks headers
// signed now by signer.
func signedRequests(signer signature.Signer, ids []string, body func(i int) []byte) ([]outgoing, error) {
	out := make([]outgoing, len(ids))
	now := time.Now()
	for i, id := range ids {
		b := body(i)
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req, signature.Message{ID: id, Body: b, Time: now}); err != nil {
			return nil, err
		}
		out[i] = outgoing{id: id, body: b, header: req.Header}
	}
	return out, nil
}

// loadTransport is the load loops' HTTP transport: keep-alive
// connections, one per concurrent sender.
func loadTransport(concurrency int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        concurrency,
		MaxIdleConnsPerHost: concurrency,
		MaxConnsPerHost:     concurrency,
		IdleConnTimeout:     90 * time.Second,
	}
}

// postLoop sends every request to target from concurrency goroutines,
// each reading the whole answer, and returns how long that took. Any
// answer but 200 is an error.
func postLoop(ctx context.Context, target string, reqs []outgoing, concurrency int) (time.Duration, error) {
	tr := loadTransport(concurrency)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(reqs) || ctx.Err() != nil {
					return
				}
				o := reqs[i]
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(o.body))
				if err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
					continue
				}
				if o.header != nil {
					req.Header = o.header.Clone()
				} else {
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("webhook-id", o.id)
				}
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					once.Do(func() { firstErr = fmt.Errorf("status %d", resp.StatusCode) })
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if n := failed.Load(); n > 0 {
		return 0, fmt.Errorf("%d of %d requests failed, first: %w", n, len(reqs), firstErr)
	}
	return elapsed, nil
}

// loopbackGuard opens the worker's SSRF guard for exactly the test
// server's address and port, over plain http.
func loopbackGuard(rawURL string) client.Guard {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	port, _ := strconv.Atoi(u.Port())
	return client.Guard{
		AllowHTTP:     true,
		AllowPorts:    []uint16{uint16(port)},
		AllowPrefixes: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr(u.Hostname()), 32)},
	}
}

// keys returns a Standard Webhooks signer and the verifier for it.
func keys() (signature.Signer, signature.Verifier, error) {
	key, err := signature.ParseStandardWebhooksKey("bench", signature.NewStandardWebhooksSecret())
	if err != nil {
		return nil, nil, err
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return nil, nil, err
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "bench-sender", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		return nil, nil, err
	}
	return signer, verifier, nil
}

// ids returns n notification ids prefix0..prefix(n-1).
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}
