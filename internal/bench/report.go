package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// row is one figure of the table: courier's measurement, its baseline
// from the same run, their ratio and the target it is held to.
type row struct {
	id, name, engine  string
	courier, baseline string // formatted measurements
	ratio             string
	target            string
	pass              bool
	info              bool // no target: shown for context
	detail            string
}

// throughputRow is a figure whose ratio is courier's rate over the
// baseline's, held to at least min. The rounds are paired (each courier
// run next to a baseline run), and the ratio is the median of the rounds'
// ratios, so that load from elsewhere on the machine, which changes from
// minute to minute, falls on both sides of each ratio.
func throughputRow(id, name, eng string, courier, baseline runs, min float64) row {
	ratio := median(pairedRatios(courier.rates, baseline.rates))
	return row{
		id: id, name: name, engine: eng,
		courier: fmt.Sprintf("%.0f /s", median(courier.rates)), baseline: fmt.Sprintf("%.0f /s", median(baseline.rates)),
		ratio: fmt.Sprintf("%.1f%%", 100*ratio), target: fmt.Sprintf(">= %.0f%%", 100*min),
		pass: ratio >= min,
	}
}

// pairedRatios returns a[i]/b[i] for each round i.
func pairedRatios[T float64 | time.Duration](a, b []T) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = float64(a[i]) / float64(b[i])
	}
	return out
}

// costRow is a figure whose ratio is courier's cost over the baseline's,
// held to at most max.
func costRow(id, name, eng string, courier, baseline time.Duration, max float64) row {
	return costRowRatio(id, name, eng, courier, baseline, float64(courier)/float64(baseline), max)
}

// costRowRatio is costRow with the ratio given, for paired measurements.
func costRowRatio(id, name, eng string, courier, baseline time.Duration, ratio, max float64) row {
	return row{
		id: id, name: name, engine: eng,
		courier: fmtDuration(courier) + "/op", baseline: fmtDuration(baseline) + "/op",
		ratio: fmt.Sprintf("%.2fx", ratio), target: fmt.Sprintf("<= %.1fx", max),
		pass: ratio <= max,
	}
}

func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}

func fmtBytes(b uint64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// printTable writes the rows, then the details some rows carry.
func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tfigure\tengine\tcourier\tbaseline\tratio\ttarget\tresult")
	for _, r := range rows {
		result := "MISS"
		switch {
		case r.info:
			result = "info"
		case r.pass:
			result = "PASS"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.id, r.name, r.engine, r.courier, r.baseline, r.ratio, r.target, result)
	}
	tw.Flush()
	var details []string
	for _, r := range rows {
		if r.detail != "" {
			details = append(details, fmt.Sprintf("  %s %s: %s", r.id, r.engine, r.detail))
		}
	}
	if len(details) > 0 {
		fmt.Fprintln(w, "\ndetails:")
		fmt.Fprintln(w, strings.Join(details, "\n"))
	}
	pass, miss := 0, 0
	for _, r := range rows {
		switch {
		case r.info:
		case r.pass:
			pass++
		default:
			miss++
		}
	}
	fmt.Fprintf(w, "\n%d targets: %d PASS, %d MISS\n", pass+miss, pass, miss)
}

// progress reports what the program is doing, on standard error, so that
// standard output holds the table alone.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// percentile returns the p-th percentile (0..100) of xs by nearest rank.
func percentile(xs []time.Duration, p int) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runs collects the measured runs of one side of a throughput figure.
type runs struct {
	rates    []float64       // operations per second
	cores    []float64       // process CPU time per wall second
	cpuPerOp []time.Duration // process CPU time per operation
}

// measure runs fn, which does n operations and returns the wall time it
// measured, and records the rate and the process CPU time used meanwhile.
// A run that keeps well under the machine's cores busy is waiting (on
// locks, sleeps, the network or another process), not computing; the CPU
// time per operation is what each operation costs this process whatever
// else the machine runs.
func (r *runs) measure(n int, fn func() (time.Duration, error)) error {
	c0 := processCPU()
	took, err := fn()
	used := processCPU() - c0
	if err != nil || took <= 0 {
		return err
	}
	r.rates = append(r.rates, float64(n)/took.Seconds())
	r.cores = append(r.cores, used.Seconds()/took.Seconds())
	r.cpuPerOp = append(r.cpuPerOp, used/time.Duration(n))
	return nil
}

func (r *runs) last() float64 { return r.rates[len(r.rates)-1] }

func cpuDetail(courier, baseline runs) string {
	return fmt.Sprintf("process CPU per op: courier %s, baseline %s; cores busy: courier %.2f, baseline %.2f (medians)",
		fmtDuration(median(courier.cpuPerOp)), fmtDuration(median(baseline.cpuPerOp)), median(courier.cores), median(baseline.cores))
}

// loadAverage returns the machine's 1-minute load average, as the kernel
// reports it, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
