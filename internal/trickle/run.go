//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/courier-go/courier/signature"
)

// run starts the receiver, measures it idle, attacks it and reports.
func run(cfg config) error {
	dir, err := os.MkdirTemp("", "courier-trickle")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	secret := signature.NewStandardWebhooksSecret()
	child, addr, err := startChild(cfg.server, filepath.Join(dir, "receiver.db"), secret)
	if err != nil {
		return err
	}
	defer stopChild(child)
	pid := child.Process.Pid

	if err := warmUp(addr, secret, cfg.warmup); err != nil {
		return err
	}
	before, err := readProc(pid)
	if err != nil {
		return err
	}
	fmt.Printf("receiver: pid %d, http.Server %s\n", pid, serverDesc(cfg.server))
	fmt.Printf("attack: %d connections declaring Content-Length %d; %d bytes at once, then %d bytes every %v; %d idle keep-alive connections; %v\n",
		cfg.conns, cfg.length, cfg.burst, cfg.rate, cfg.every, cfg.idle, cfg.duration)

	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	start := time.Now()
	samples := make(chan []sample, 1)
	go func() { samples <- sampleProc(ctx, pid, cfg.sample, start) }()

	burst := make([]byte, cfg.burst)
	for i := range burst {
		burst[i] = ' '
	}
	trickling := make([]connResult, cfg.conns)
	idle := make([]connResult, cfg.idle)
	var wg sync.WaitGroup
	for i := range trickling {
		wg.Go(func() { trickling[i] = trickleConn(ctx, addr, cfg, burst) })
	}
	for i := range idle {
		wg.Go(func() { idle[i] = idleConn(ctx, addr) })
	}
	wg.Wait()
	<-ctx.Done()
	series := <-samples

	report(cfg, before, series, trickling, idle)
	return nil
}

// startChild runs this program as the receiver and returns it with the
// address it listens on.
func startChild(mode, db, secret string) (*exec.Cmd, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(exe, "-child", "-server", mode, "-db", db)
	cmd.Env = append(os.Environ(), secretEnv+"="+secret)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive this program
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stopChild(cmd)
		return nil, "", fmt.Errorf("the receiver did not start: %w", err)
	}
	return cmd, strings.TrimSpace(line), nil
}

// stopChild asks the receiver to shut down and kills it if it has not
// within 15 s.
func stopChild(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func serverDesc(mode string) string {
	if mode == "full" {
		return fmt.Sprintf("ReadHeaderTimeout %v, ReadTimeout %v, WriteTimeout %v, IdleTimeout %v, MaxHeaderBytes %d",
			readHeaderTimeout, readTimeout, writeTimeout, idleTimeout, maxHeaderBytes)
	}
	return fmt.Sprintf("ReadHeaderTimeout %v only", readHeaderTimeout)
}

// sample is the receiver's state at one moment.
type sample struct {
	at       time.Duration // since the attack began
	rss, hwm int64         // bytes
	fds      int
}

// readProc reads the receiver's resident memory and open descriptors.
func readProc(pid int) (sample, error) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return sample{}, err
	}
	var s sample
	for line := range bytes.Lines(status) {
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			s.rss = kb << 10
		case "VmHWM:":
			s.hwm = kb << 10
		}
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return sample{}, err
	}
	s.fds = len(fds)
	return s, nil
}

// sampleProc reads the receiver every interval until ctx ends.
func sampleProc(ctx context.Context, pid int, every time.Duration, start time.Time) []sample {
	var out []sample
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if s, err := readProc(pid); err == nil {
			s.at = time.Since(start)
			out = append(out, s)
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// report prints the run's figures.
func report(cfg config, before sample, series []sample, trickling, idle []connResult) {
	fmt.Printf("\n%8s  %10s  %5s\n", "t", "VmRSS", "fds")
	fmt.Printf("%8s  %10s  %5d\n", "before", mib(before.rss), before.fds)
	step := max(cfg.duration/12, cfg.sample)
	next := time.Duration(0)
	var peak sample
	for i, s := range series {
		if s.rss > peak.rss {
			peak.rss = s.rss
		}
		peak.fds = max(peak.fds, s.fds)
		peak.hwm = max(peak.hwm, s.hwm)
		if s.at >= next || i == len(series)-1 {
			fmt.Printf("%8s  %10s  %5d\n", s.at.Round(100*time.Millisecond), mib(s.rss), s.fds)
			next += step
		}
	}
	fmt.Printf("\nVmRSS before %s, peak during %s (VmHWM %s); fds before %d, peak %d\n",
		mib(before.rss), mib(peak.rss), mib(peak.hwm), before.fds, peak.fds)
	if len(series) > 0 {
		last := series[len(series)-1]
		fmt.Printf("at the end (%v): VmRSS %s, fds %d\n", last.at.Round(100*time.Millisecond), mib(last.rss), last.fds)
	}
	summarize("trickling connections", cfg.duration, trickling)
	summarize("idle connections", cfg.duration, idle)
}

// summarize prints how a group of connections ended and how long they lived.
func summarize(name string, duration time.Duration, rs []connResult) {
	if len(rs) == 0 {
		return
	}
	var all, closed []time.Duration
	failed := 0
	answers, ends := map[string]int{}, map[string]int{}
	var dialErr error
	for _, r := range rs {
		if r.dialErr != nil {
			failed++
			dialErr = r.dialErr
			continue
		}
		answer := "none"
		if r.status != 0 {
			answer = strconv.Itoa(r.status)
		}
		answers[answer]++
		if r.open {
			all = append(all, duration) // a lower bound
			continue
		}
		ends[r.end]++
		all = append(all, r.lived)
		closed = append(closed, r.lived)
	}
	slices.Sort(all)
	slices.Sort(closed)
	open := len(all) - len(closed)
	fmt.Printf("%s: %d opened", name, len(all))
	if failed > 0 {
		fmt.Printf(", %d failed to dial (%v)", failed, dialErr)
	}
	fmt.Printf("; ended by the server %d (%s), still open after %v %d\n", len(closed), counts(ends), duration, open)
	if len(all) > 0 {
		fmt.Printf("  lifetime, all: p50 %s, max %s\n", lifetime(all[len(all)/2], duration, open), lifetime(all[len(all)-1], duration, open))
	}
	if len(closed) > 0 {
		fmt.Printf("  lifetime, ended by the server: p50 %s, max %s\n", lifetime(closed[len(closed)/2], duration, 0), lifetime(closed[len(closed)-1], duration, 0))
	}
	fmt.Printf("  answers: %s\n", counts(answers))
}

// counts prints m as "k ×n" pairs in key order.
func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// lifetime prints d, as a lower bound when it stands for connections still
// open at the end.
func lifetime(d, duration time.Duration, open int) string {
	if open > 0 && d >= duration {
		return "≥" + duration.String() + " (still open)"
	}
	return d.Round(10 * time.Millisecond).String()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
