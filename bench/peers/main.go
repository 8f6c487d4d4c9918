// Command peers runs courier and River side by side on the same shape, in
// one run on one machine, and prints their figures and ratios, next to a
// bare POST loop that bounds what any queue could reach:
//
//	cd bench/peers && go run . [-n 10000] [-rounds 3] [-engines sqlite,postgres]
//	                           [-concurrency 64] [-endpoint-concurrency 0] [-pgpool 0]
//	                           [-river-fetch-cooldown 100ms]
//
// The shape, on each engine:
//
//   - enqueue: n notifications, one per transaction (BEGIN, enqueue,
//     COMMIT): courier's Outbox.Enqueue against River's InsertTx, the same
//     payloads (about 110 bytes) on the same engine; reported in µs per
//     transaction.
//   - delivery: the n notifications just enqueued, a backlog of due work,
//     each worked by one HTTP POST of its payload to the same bare
//     receiver (an httptest server answering courier's Ack for the body),
//     concurrency at once: courier's client.Worker on its real path
//     (signing, the SSRF guard opened for the loopback receiver, Ack
//     verification) against a River client whose job posts the payload
//     with a keep-alive client and checks for a 200; timed from the start
//     of the worker or client to the last completion; reported in
//     deliveries per second.
//   - a bare loop: concurrency goroutines posting the same payloads to the
//     same receiver, with no queue at all.
//
// Every notification goes to one endpoint, so courier's fair share
// (client.Config.EndpointConcurrency, by default half the worker's
// Concurrency) holds half the slots back for endpoints that never come;
// River has no such share. -endpoint-concurrency set to -concurrency
// measures courier as a deployment that sends to one endpoint configures
// it.
//
// Each round gives each side fresh databases, runs the sides back to back
// (in reverse order in odd rounds, so a drift of the machine falls on
// all), and checks that every notification was completed exactly once on
// each side. The figures are the medians of the rounds; the ratios, the
// medians of each round's ratios.
//
// SQLite runs on files in a temporary folder. PostgreSQL is the server at
// COURIER_PG_URL or, without it, a throwaway server started like courier's
// tests start theirs (internal/pgtest); when neither can be had the
// program says so and measures SQLite alone, unless COURIER_PG_REQUIRE is
// 1, in which case it fails. The report goes to standard output, progress
// to standard error. A failed run exits with status 1.
//
// This is a module of its own so that River and its drivers never become
// dependencies of courier.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/signature"
)

// options are the command's flags.
type options struct {
	n             int
	rounds        int
	engines       []string
	concurrency   int
	endpointConc  int // courier's Config.EndpointConcurrency; 0 keeps its default
	pgPool        int
	fetchCooldown time.Duration
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// parseFlags reads and checks the command line.
func parseFlags(args []string) (options, error) {
	var o options
	var engines string
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.IntVar(&o.n, "n", 10_000, "notifications per side and round: enqueued one per transaction, then worked as a backlog")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; the figures are their medians")
	fs.StringVar(&engines, "engines", "sqlite,postgres", "engines to measure, comma-separated: sqlite, postgres")
	fs.IntVar(&o.concurrency, "concurrency", 64, "deliveries in flight at once: courier's Concurrency, River's MaxWorkers, the bare loop's goroutines")
	fs.IntVar(&o.endpointConc, "endpoint-concurrency", 0, "courier's Config.EndpointConcurrency, the most deliveries to one endpoint in flight at once (0: its default, half of -concurrency); River has no such share")
	fs.IntVar(&o.pgPool, "pgpool", 0, "PostgreSQL connection pool of each side (0: concurrency + 2, as store.Open's documentation asks)")
	fs.DurationVar(&o.fetchCooldown, "river-fetch-cooldown", river.FetchCooldownDefault,
		"River's Config.FetchCooldown, the least time between two fetches of a queue (River's default shown)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.engines = strings.Split(engines, ",")
	if o.pgPool == 0 {
		o.pgPool = o.concurrency + 2
	}
	switch {
	case o.n < 1:
		return options{}, errors.New("-n must be at least 1")
	case o.rounds < 1:
		return options{}, errors.New("-rounds must be at least 1")
	case o.concurrency < 1 || o.concurrency > 10_000:
		return options{}, errors.New("-concurrency must be within 1..10000 (River's MaxWorkers range)")
	case o.endpointConc < 0 || o.endpointConc > o.concurrency:
		return options{}, errors.New("-endpoint-concurrency must be within 0..concurrency")
	case o.pgPool < 1:
		return options{}, errors.New("-pgpool must be at least 1")
	case o.fetchCooldown < river.FetchCooldownMin:
		return options{}, fmt.Errorf("-river-fetch-cooldown must be at least %s (River's minimum)", river.FetchCooldownMin)
	}
	return o, nil
}

// bench is one run's shared parts: the options, the bare receiver every
// side posts to, and courier's signing key.
type bench struct {
	o        options
	target   string // the receiver's URL
	guard    client.Guard
	signer   signature.Signer
	progress io.Writer
}

// newBench prepares a run posting to the receiver at target.
func newBench(o options, target string, progress io.Writer) (*bench, error) {
	guard := couriertest.Guard(target)
	signer, err := newSigner()
	if err != nil {
		return nil, err
	}
	return &bench{o: o, target: target, guard: guard, signer: signer, progress: progress}, nil
}

// run measures every engine named in o against a bare receiver and writes
// the report to out.
func run(ctx context.Context, o options, out, progress io.Writer) error {
	engines, notes, stop, err := openEngines(ctx, o.engines, o.pgPool)
	if err != nil {
		return err
	}
	defer stop()
	for _, n := range notes {
		fmt.Fprintln(progress, n)
	}
	if len(engines) == 0 {
		return errors.New("no engine to measure")
	}

	receiver := httptest.NewServer(http.HandlerFunc(benchkit.BareAck))
	defer receiver.Close()
	b, err := newBench(o, receiver.URL, progress)
	if err != nil {
		return err
	}
	results := make([]result, 0, len(engines))
	for _, e := range engines {
		rounds, err := b.measure(ctx, e)
		if err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		results = append(results, result{engine: e, rounds: rounds})
	}
	return report(out, o, results, notes)
}

// round is one round's figures on one engine.
type round struct {
	courierEnqueue, riverEnqueue     time.Duration // per transaction
	courierRate, riverRate, bareRate float64       // deliveries (POSTs) per second
}

// measure runs the rounds on e.
func (b *bench) measure(ctx context.Context, e *engine) ([]round, error) {
	rounds := make([]round, 0, b.o.rounds)
	for r := range b.o.rounds {
		rd, err := b.round(ctx, e, r)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", r+1, err)
		}
		fmt.Fprintf(b.progress, "%s round %d: enqueue courier %s/op, River %s/op; delivery courier %.0f/s, River %.0f/s, bare loop %.0f/s\n",
			e.name, r+1, fmtMicros(rd.courierEnqueue), fmtMicros(rd.riverEnqueue), rd.courierRate, rd.riverRate, rd.bareRate)
		rounds = append(rounds, rd)
	}
	return rounds, nil
}

// round runs one round on e: fresh databases for both sides, the enqueue
// loops, then the backlogs worked and the bare loop, then the checks.
func (b *bench) round(ctx context.Context, e *engine, r int) (rd round, err error) {
	n := b.o.n
	c, err := e.openCourier(ctx, fmt.Sprintf("courier-%d", r), courierConfig{
		target: b.target, guard: b.guard, signer: b.signer, concurrency: b.o.concurrency,
		endpointConcurrency: b.o.endpointConc,
	})
	if err != nil {
		return round{}, err
	}
	defer func() { err = errors.Join(err, c.close()) }()
	rv, err := e.openRiver(ctx, fmt.Sprintf("river-%d", r), riverConfig{
		target: b.target, concurrency: b.o.concurrency, fetchCooldown: b.o.fetchCooldown,
	})
	if err != nil {
		return round{}, err
	}
	defer func() { err = errors.Join(err, rv.close()) }()

	// The ids differ by side in their first letter only, so every side's
	// payloads have the same size.
	courierNs := notifications(fmt.Sprintf("c%d-", r), n)
	riverNs := notifications(fmt.Sprintf("r%d-", r), n)
	bareNs := notifications(fmt.Sprintf("b%d-", r), n)

	var courierEnq, riverEnq, courierDel, riverDel, bareDel time.Duration
	timed := func(d *time.Duration, f func() (time.Duration, error)) func() error {
		return func() (err error) {
			*d, err = f()
			return err
		}
	}
	fmt.Fprintf(b.progress, "%s round %d: enqueue %d one per transaction\n", e.name, r+1, n)
	if err := alternate(r,
		timed(&courierEnq, func() (time.Duration, error) { return c.enqueue(ctx, courierNs) }),
		timed(&riverEnq, func() (time.Duration, error) { return rv.enqueue(ctx, riverNs) }),
	); err != nil {
		return round{}, err
	}
	fmt.Fprintf(b.progress, "%s round %d: deliver %d, %d at once\n", e.name, r+1, n, b.o.concurrency)
	if err := alternate(r,
		timed(&courierDel, func() (time.Duration, error) { return c.deliver(ctx, n) }),
		timed(&riverDel, func() (time.Duration, error) { return rv.deliver(ctx, n) }),
		timed(&bareDel, func() (time.Duration, error) { return bareLoop(ctx, b.target, bareNs, b.o.concurrency) }),
	); err != nil {
		return round{}, err
	}
	if err := errors.Join(c.verify(ctx, n), rv.verify(ctx, n)); err != nil {
		return round{}, err
	}
	return round{
		courierEnqueue: courierEnq / time.Duration(n),
		riverEnqueue:   riverEnq / time.Duration(n),
		courierRate:    rate(n, courierDel),
		riverRate:      rate(n, riverDel),
		bareRate:       rate(n, bareDel),
	}, nil
}

// rate is n per d, in per second.
func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
