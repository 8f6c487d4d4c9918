package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Request is one POST of a load loop: Body, with Header as is, or, when
// Header is nil, with Content-Type and the notification ID in webhook-id.
type Request struct {
	ID     string
	Body   []byte
	Header http.Header
}

// Transport is a load loop's HTTP transport: keep-alive connections, one
// per concurrent sender, as courier's worker keeps.
func Transport(concurrency int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        concurrency,
		MaxIdleConnsPerHost: concurrency,
		MaxConnsPerHost:     concurrency,
		IdleConnTimeout:     90 * time.Second,
	}
}

// Post sends r to target with hc, reads the whole answer and fails unless
// it is a 200.
func Post(ctx context.Context, hc *http.Client, target string, r Request) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(r.Body))
	if err != nil {
		return err
	}
	if r.Header != nil {
		req.Header = r.Header.Clone()
	} else {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", r.ID)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: status %d", r.ID, resp.StatusCode)
	}
	return nil
}

// PostLoop posts every request to target with hc from concurrency
// goroutines, each request once, and returns how long that took. Any
// failed POST fails the loop.
func PostLoop(ctx context.Context, hc *http.Client, target string, reqs []Request, concurrency int) (time.Duration, error) {
	var next, failed atomic.Int64
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
				if err := Post(ctx, hc, target, reqs[i]); err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
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
		return 0, fmt.Errorf("%d of %d POSTs failed, first: %w", n, len(reqs), firstErr)
	}
	return elapsed, nil
}
