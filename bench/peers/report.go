package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/riverqueue/river"
)

// result is the rounds measured on one engine.
type result struct {
	engine *engine
	rounds []round
}

// report writes the figures: a header saying what ran where, then per
// engine how each side was set up and a table of medians and ratios, with
// every round's figures below it.
func report(w io.Writer, o options, results []result, notes []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "courier and River side by side (bench/peers)\n")
	fmt.Fprintf(&b, "shape: %d enqueued one per transaction, then worked as a backlog with one POST each to the same bare receiver, %d at once; median of %d round(s)\n",
		o.n, o.concurrency, o.rounds)
	fmt.Fprintf(&b, "machine: %s/%s, %d CPUs, GOMAXPROCS %d, %s; River %s with FetchCooldown %s%s\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(),
		moduleVersion("github.com/riverqueue/river"), o.fetchCooldown, defaultNote(o.fetchCooldown))
	fmt.Fprintf(&b, "River fetches at most MaxWorkers jobs per FetchCooldown: here at most %.0f jobs/s (-river-fetch-cooldown changes it)\n",
		float64(o.concurrency)/o.fetchCooldown.Seconds())
	if o.endpointConc == 0 {
		fmt.Fprintf(&b, "courier's fair share: EndpointConcurrency %d, its default (half the slots; the one endpoint of this shape never has the rest; -endpoint-concurrency changes it)\n",
			o.concurrency-o.concurrency/2)
	} else {
		fmt.Fprintf(&b, "courier's fair share: EndpointConcurrency %d (-endpoint-concurrency; the default is half the slots)\n", o.endpointConc)
	}
	for _, r := range results {
		fmt.Fprintf(&b, "\n%s\n", r.engine.name)
		for _, line := range r.engine.setup() {
			fmt.Fprintf(&b, "  %s\n", line)
		}
		b.WriteString("\n")
		writeTable(&b, r.rounds)
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "note: %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable writes one engine's table.
func writeTable(w io.Writer, rounds []round) {
	pick := func(f func(round) float64) []float64 {
		out := make([]float64, len(rounds))
		for i, r := range rounds {
			out[i] = f(r)
		}
		return out
	}
	courierEnq := pick(func(r round) float64 { return micros(r.courierEnqueue) })
	riverEnq := pick(func(r round) float64 { return micros(r.riverEnqueue) })
	courierRate := pick(func(r round) float64 { return r.courierRate })
	riverRate := pick(func(r round) float64 { return r.riverRate })
	bareRate := pick(func(r round) float64 { return r.bareRate })

	writeRow(w, "", "courier", "River", "bare loop", "courier÷River", "courier÷bare", "River÷bare")
	writeRow(w, "enqueue, µs/tx (lower is better)",
		fmt.Sprintf("%.1f", median(courierEnq)), fmt.Sprintf("%.1f", median(riverEnq)), "-",
		fmt.Sprintf("%.2fx", median(ratios(courierEnq, riverEnq))), "-", "-")
	writeRow(w, "delivery, /s (higher is better)",
		fmt.Sprintf("%.0f", median(courierRate)), fmt.Sprintf("%.0f", median(riverRate)), fmt.Sprintf("%.0f", median(bareRate)),
		fmt.Sprintf("%.2fx", median(ratios(courierRate, riverRate))),
		fmt.Sprintf("%.1f%%", 100*median(ratios(courierRate, bareRate))), fmt.Sprintf("%.1f%%", 100*median(ratios(riverRate, bareRate))))
	fmt.Fprintf(w, "  rounds: enqueue µs/tx courier %s, River %s; delivery /s courier %s, River %s, bare loop %s\n",
		list(courierEnq, "%.1f"), list(riverEnq, "%.1f"), list(courierRate, "%.0f"), list(riverRate, "%.0f"), list(bareRate, "%.0f"))
}

// writeRow writes one row of a table: the label left-aligned, the cells
// right-aligned in columns wide enough for the header's.
func writeRow(w io.Writer, label string, cells ...string) {
	widths := []int{10, 10, 11, 15, 14, 12}
	var b strings.Builder
	fmt.Fprintf(&b, "  %-34s", label)
	for i, c := range cells {
		b.WriteString(strings.Repeat(" ", max(widths[i]-utf8.RuneCountInString(c), 1)))
		b.WriteString(c)
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratios returns a[i]/b[i] for each round i: each ratio is of two runs
// made back to back, so load from elsewhere falls on both.
func ratios(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] / b[i]
	}
	return out
}

// list formats xs with format, separated by slashes.
func list(xs []float64, format string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, "/")
}

// micros is d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// fmtMicros formats d in microseconds.
func fmtMicros(d time.Duration) string { return fmt.Sprintf("%.1f µs", micros(d)) }

// moduleVersion is the version of the module at path this program was
// built with, or "?".
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "?"
}

// defaultNote marks River's default FetchCooldown.
func defaultNote(d time.Duration) string {
	if d == river.FetchCooldownDefault {
		return " (its default)"
	}
	return ""
}
