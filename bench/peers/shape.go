package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

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

// notifications returns the n notifications of a shape, each a request
// whose ids are prefix followed by a
// zero-padded index, so that every side's ids, and so its payloads, have
// the same length.
func notifications(prefix string, n int) []benchkit.Request {
	width := len(strconv.Itoa(n - 1))
	out := make([]benchkit.Request, n)
	for i := range out {
		id := fmt.Sprintf("%s%0*d", prefix, width, i)
		out[i] = benchkit.Request{ID: id, Body: benchkit.Payload(id)}
	}
	return out
}

// httpClient is the HTTP client of River's job and of the bare loop: one
// keep-alive connection per concurrent sender to the receiver, as courier's
// transport keeps, and each request bounded by postTimeout.
func httpClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout:   postTimeout,
		Transport: benchkit.Transport(concurrency),
	}
}

// bareLoop is the baseline: concurrency goroutines posting the
// notifications to target with the same client setup as River's job, each
// notification once. It returns how long that took; any failed POST fails
// the run.
func bareLoop(ctx context.Context, target string, ns []benchkit.Request, concurrency int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, runLimit)
	defer cancel()
	hc := httpClient(concurrency)
	defer hc.CloseIdleConnections()
	elapsed, err := benchkit.PostLoop(ctx, hc, target, ns, concurrency)
	if err != nil {
		return 0, fmt.Errorf("bare loop: %w", err)
	}
	return elapsed, nil
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

// timedEach runs one for each notification in turn, within runLimit, and
// returns how long they all took; the first error ends the run, named by
// what and the notification's id.
func timedEach(ctx context.Context, what string, ns []benchkit.Request, one func(context.Context, benchkit.Request) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, runLimit)
	defer cancel()
	start := time.Now()
	for _, n := range ns {
		if err := one(ctx, n); err != nil {
			return 0, fmt.Errorf("%s %s: %w", what, n.ID, err)
		}
	}
	return time.Since(start), nil
}
