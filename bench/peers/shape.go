package main

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/signature"
)

// runLimit bounds any one measured run (an enqueue loop, a backlog worked,
// a POST loop), so that a stuck run ends the program with an error instead
// of hanging it.
const runLimit = 5 * time.Minute

// postTimeout bounds one POST of River's job and of the bare loop, as
// courier's default attempt timeout (client.Config.Timeout, 15 seconds)
// bounds courier's.
const postTimeout = 15 * time.Second

// notification is one unit of the shape: a notification id and the payload
// that goes with it. Every side sends the same payloads, of the same size.
type notification struct {
	id   string
	body []byte
}

// notifications returns n notifications whose ids are prefix followed by a
// zero-padded index, so that every side's ids, and so its payloads, have
// the same length.
func notifications(prefix string, n int) []notification {
	width := len(strconv.Itoa(n - 1))
	out := make([]notification, n)
	for i := range out {
		id := fmt.Sprintf("%s%0*d", prefix, width, i)
		out[i] = notification{id: id, body: benchkit.Payload(id)}
	}
	return out
}

// httpClient is the HTTP client of River's job and of the bare loop: one
// keep-alive connection per concurrent sender to the receiver, as courier's
// transport keeps, and each request bounded by postTimeout.
func httpClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout: postTimeout,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        concurrency,
			MaxIdleConnsPerHost: concurrency,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// post sends body to target with the notification id in webhook-id, reads
// the whole answer and fails unless it is a 200.
func post(ctx context.Context, hc *http.Client, target, id string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: status %d", id, resp.StatusCode)
	}
	return nil
}

// bareLoop is the baseline: concurrency goroutines posting the
// notifications to target with the same client setup as River's job, each
// notification once. It returns how long that took; any failed POST fails
// the run.
func bareLoop(ctx context.Context, target string, ns []notification, concurrency int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, runLimit)
	defer cancel()
	hc := httpClient(concurrency)
	defer hc.CloseIdleConnections()
	var next, failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ns) || ctx.Err() != nil {
					return
				}
				if err := post(ctx, hc, target, ns[i].id, ns[i].body); err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("bare loop: %w", err)
	}
	if n := failed.Load(); n > 0 {
		return 0, fmt.Errorf("bare loop: %d of %d POSTs failed, first: %w", n, len(ns), firstErr)
	}
	return elapsed, nil
}

// loopbackGuard opens courier's SSRF guard for exactly the receiver's
// loopback address and port, over plain http: the one change courier's
// worker needs to deliver to a test server.
func loopbackGuard(rawURL string) (client.Guard, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return client.Guard{}, err
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return client.Guard{}, fmt.Errorf("receiver %s: %w", rawURL, err)
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil {
		return client.Guard{}, fmt.Errorf("receiver %s: port: %w", rawURL, err)
	}
	return client.Guard{
		AllowHTTP:     true,
		AllowPorts:    []uint16{uint16(port)},
		AllowPrefixes: []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())},
	}, nil
}

// newSigner returns a Standard Webhooks signer with a fresh random key:
// courier's worker signs every attempt.
func newSigner() (signature.Signer, error) {
	key, err := signature.ParseStandardWebhooksKey("peers", signature.NewStandardWebhooksSecret())
	if err != nil {
		return nil, err
	}
	return signature.NewStandardWebhooksSigner(key)
}

// alternate runs fns in order in even rounds and in reverse order in odd
// ones, so that a drift of the machine during a round falls on every side.
// It stops at the first error.
func alternate(round int, fns ...func() error) error {
	for i := range fns {
		j := i
		if round%2 == 1 {
			j = len(fns) - 1 - i
		}
		if err := fns[j](); err != nil {
			return err
		}
	}
	return nil
}

// errIncomplete reports a run that ended before its work was done.
var errIncomplete = errors.New("incomplete")
