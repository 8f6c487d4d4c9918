// Command bench measures courier against its performance targets (BENCHMARKS.md
// lists them). Every figure is a ratio to a baseline measured in the same
// run, on the same machine, so the table holds across machines of a kind:
//
//	go run ./internal/bench [-engines=sqlite,postgres] [-quick] [-cpuprofile file]
//	                        [-run figures] [-concurrency 16] [-pgpool 32] [-workerdue 0]
//
//	1  enqueue in the caller's transaction vs a plain INSERT of the same row
//	2  the worker draining an outbox to a bare receiver vs a bare POST loop
//	3  the receiver with durable dedupe vs a bare handler writing the same Ack
//	4a end to end throughput (SQLite outbox -> HTTP -> SQLite inbox) vs the bare loop
//	4b enqueue commit -> handler latency with the worker idle
//	5  claim cost at 1,000 vs 1,000,000 due rows (5b: across 1k/10k/100k/1M)
//	6  worker heap at 10,000 vs 1,000,000 due rows
//	7  SQLite's durable commits (the default, synchronous=FULL) vs relaxed
//	   ones (synchronous=NORMAL): enqueue per transaction and the receiver
//
// The delivery-control figures (8a fairshare, 8b rate, 8c keyclaim; see
// control.go) run only when -run names them.
//
// PostgreSQL is the server at COURIER_PG_URL or, without it, a throwaway
// server started like the tests' (internal/pgtest). When neither works the
// program says so and measures SQLite alone. Progress goes to standard
// error; the table to standard output. BENCHMARKS.md explains each figure.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/courier-go/courier/internal/benchkit"
)

// figures are the names -run selects from, in the order they run.
var figures = []string{"enqueue", "worker", "receiver", "e2e", "claim", "memory", "durability"}

type options struct {
	engines     []string
	quick       bool
	cpuprofile  string
	run         []string
	concurrency int
	pgPool      int
	workerDue   int
}

// sizes are the amounts of work of one run.
type sizes struct {
	enqueueOps                map[string]int // transactions per block, by engine
	enqueueRounds             int            // blocks of each
	workerM, workerRounds     int
	receiverN, receiverRounds int
	e2eM, e2eRounds           int
	latencySamples            int
	claimSizes                []int // ascending; the last is the large outbox
	claimRounds               int
	memSmall, memWarm         int
}

var (
	fullSizes = sizes{
		enqueueOps: map[string]int{"sqlite": 50, "postgres": 20}, enqueueRounds: 100,
		workerM: 5000, workerRounds: 5,
		receiverN: 5000, receiverRounds: 5,
		e2eM: 2000, e2eRounds: 5, latencySamples: 200,
		claimSizes: []int{1_000, 10_000, 100_000, 1_000_000}, claimRounds: 40,
		memSmall: 10_000, memWarm: 1000,
	}
	quickSizes = sizes{
		enqueueOps: map[string]int{"sqlite": 50, "postgres": 20}, enqueueRounds: 20,
		workerM: 2000, workerRounds: 1,
		receiverN: 2000, receiverRounds: 1,
		e2eM: 2000, e2eRounds: 1, latencySamples: 30,
		claimSizes: []int{1_000, 10_000, 100_000}, claimRounds: 10,
		memSmall: 10_000, memWarm: 500,
	}
)

func main() {
	var o options
	var engines, run string
	flag.StringVar(&engines, "engines", "sqlite,postgres", "store engines to measure, comma-separated")
	flag.BoolVar(&o.quick, "quick", false, "smaller sizes and fewer rounds, for a fast smoke run")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.StringVar(&run, "run", strings.Join(figures, ","), "figures to measure, comma-separated: "+strings.Join(figures, ",")+
		"; and, only when named, "+strings.Join(controlFigures, ","))
	flag.IntVar(&o.concurrency, "concurrency", workerConcurrency, "worker concurrency, and that of the bare POST loop it is compared with")
	flag.IntVar(&o.workerDue, "workerdue", 0, "deliveries due in each round of figure 2 (0 keeps the run's size: 5000, or 2000 with -quick); the outbox keeps every round's, so a larger one measures the worker on a larger table")
	flag.IntVar(&o.pgPool, "pgpool", 32, "PostgreSQL connection pool: SetMaxOpenConns and SetMaxIdleConns (0 keeps database/sql's defaults: unlimited open, 2 idle)")
	flag.Parse()
	o.engines = strings.Split(engines, ",")
	o.run = strings.Split(run, ",")
	for _, f := range o.run {
		if !slices.Contains(figures, f) && !isControlFigure(f) {
			fmt.Fprintf(os.Stderr, "bench: unknown figure %q in -run (want some of %s)\n", f, strings.Join(figures, ","))
			os.Exit(2)
		}
	}
	if o.concurrency < 1 {
		fmt.Fprintln(os.Stderr, "bench: -concurrency must be at least 1")
		os.Exit(2)
	}
	if o.workerDue < 0 {
		fmt.Fprintln(os.Stderr, "bench: -workerdue must not be negative")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := benchmark(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func benchmark(ctx context.Context, o options) error {
	z := fullSizes
	if o.quick {
		z = quickSizes
	}
	if o.workerDue > 0 {
		z.workerM = o.workerDue
	}
	engines, notes, stopServers, err := openEngines(ctx, o.engines, o.pgPool)
	if err != nil {
		return err
	}
	defer stopServers()
	for _, n := range notes {
		progress("%s", n)
	}

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	signer, verifier, err := keys()
	if err != nil {
		return err
	}
	bare := httptest.NewServer(http.HandlerFunc(benchkit.BareAck))
	defer bare.Close()

	started, loadStart := time.Now(), loadAverage()
	var rows []row
	for _, e := range engines {
		err := func() error {
			defer e.closeAll()
			for _, f := range o.run {
				if (f == "e2e" || f == "durability") && e.name != "sqlite" {
					continue // the end-to-end target is stated for SQLite; durability is SQLite's setting
				}
				progress("%s: %s", e.name, f)
				var rs []row
				var err error
				switch f {
				case "enqueue":
					var r row
					r, err = benchEnqueue(ctx, e, z)
					rs = []row{r}
				case "worker":
					var r row
					r, err = benchWorker(ctx, e, z, o, bare, signer)
					rs = []row{r}
				case "receiver":
					var r row
					r, err = benchReceiver(ctx, e, z, bare, signer, verifier)
					rs = []row{r}
				case "e2e":
					rs, err = benchE2E(ctx, e, z, o, bare, signer, verifier)
				case "claim":
					rs, err = benchClaim(ctx, e, z, bare)
				case "fairshare":
					rs, err = benchFairShare(ctx, e, o, signer)
				case "rate":
					rs, err = benchRate(ctx, e, o, signer)
				case "keyclaim":
					rs, err = benchKeyClaim(ctx, e, z, bare)
				case "memory":
					var r row
					r, err = benchMemory(ctx, e, z, o, bare, signer)
					rs = []row{r}
				case "durability":
					rs, err = benchDurability(ctx, e, z, signer, verifier)
				}
				if err != nil {
					return fmt.Errorf("%s %s: %w", e.name, f, err)
				}
				for _, r := range rs {
					progress("  -> %s %s: courier %s, baseline %s, ratio %s (target %s)", r.id, r.engine, r.courier, r.baseline, r.ratio, r.target)
				}
				rows = append(rows, rs...)
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return strings.Compare(a.id, b.id) })

	mode := "full"
	if o.quick {
		mode = "quick"
	}
	fmt.Printf("courier benchmarks (%s run, %s) — %s %s/%s, GOMAXPROCS=%d, NumCPU=%d, load average %s at start, %s at end\n",
		mode, time.Since(started).Round(time.Second), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.GOMAXPROCS(0), runtime.NumCPU(), loadStart, loadAverage())
	for _, e := range engines {
		switch e.name {
		case "sqlite":
			fmt.Printf("sqlite: files in %s (WAL, synchronous=FULL: the store's default durability, store.DurabilityFull; figure 7 prices it against DurabilityRelaxed)\n", os.TempDir())
		case "postgres":
			pool := "database/sql default pool (unlimited open, 2 idle)"
			if e.pool > 0 {
				pool = fmt.Sprintf("pool of %d connections (SetMaxOpenConns, SetMaxIdleConns)", e.pool)
			}
			fmt.Printf("postgres: %s; %s\n", e.about, pool)
		}
	}
	for _, n := range notes {
		fmt.Println(n)
	}
	fmt.Println()
	printTable(os.Stdout, rows)
	return nil
}

// The defaults of a Store and a Worker that the bench writes rows with or
// measures against.
const (
	workerConcurrency = 16             // client.Config.Concurrency
	retryHorizon      = 72 * time.Hour // store.Config.RetryHorizon
	maxAttempts       = 8              // store.Config.MaxAttempts
)
