//go:build linux

// Command trickle measures what slow request bodies cost a courier receiver,
// from outside it. It starts a receiver like examples/receiver in a child
// process (itself, run again), opens many connections that each declare a
// Content-Length, send most of the body at once and then the rest a few
// bytes a second, and reports the receiver's own resident memory (VmRSS
// and VmHWM of /proc/<pid>/status) and open descriptors before and during
// the attack, and how long each connection lived until the server closed it.
//
//	go run ./internal/trickle                  # server sets ReadHeaderTimeout only
//	go run ./internal/trickle -server full     # ... and ReadTimeout, WriteTimeout, IdleTimeout, MaxHeaderBytes
//	go run ./internal/trickle -burst 0         # trickle the whole body, from its first byte
//
// Everything runs on loopback and stops by itself after -duration.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

// config is one run.
type config struct {
	server   string        // "header" or "full": the child's http.Server timeouts
	conns    int           // trickling connections
	idle     int           // keep-alive connections that go idle after one request
	length   int64         // the Content-Length each trickling connection declares
	burst    int64         // bytes of the body sent at once, before the trickle
	rate     int           // bytes trickled each interval
	every    time.Duration // the trickle's interval
	duration time.Duration // how long the attack lasts
	sample   time.Duration // how often the child's memory is read
	warmup   int           // signed deliveries sent before the baseline is read
}

func main() {
	var cfg config
	child := flag.Bool("child", false, "run as the receiver (the program starts itself so)")
	db := flag.String("db", "", "the child receiver's SQLite file")
	flag.StringVar(&cfg.server, "server", "header", `the receiver's http.Server: "header" sets ReadHeaderTimeout only (as examples/receiver did), "full" also ReadTimeout, WriteTimeout, IdleTimeout, MaxHeaderBytes`)
	flag.IntVar(&cfg.conns, "conns", 800, "trickling connections")
	flag.IntVar(&cfg.idle, "idle", 0, "keep-alive connections that make one request and then stay idle")
	flag.Int64Var(&cfg.length, "length", 1<<20, "Content-Length each trickling connection declares")
	flag.Int64Var(&cfg.burst, "burst", -1, "bytes of the body sent at once before trickling (-1: all but the last KiB)")
	flag.IntVar(&cfg.rate, "rate", 4, "bytes trickled each -every")
	flag.DurationVar(&cfg.every, "every", time.Second, "the trickle's interval")
	flag.DurationVar(&cfg.duration, "duration", 60*time.Second, "how long the attack lasts")
	flag.DurationVar(&cfg.sample, "sample", 100*time.Millisecond, "how often the receiver's memory is read")
	flag.IntVar(&cfg.warmup, "warmup", 20, "signed deliveries sent before the baseline is read")
	flag.Parse()

	if *child {
		if err := serve(cfg.server, *db); err != nil {
			fmt.Fprintln(os.Stderr, "trickle: receiver:", err)
			os.Exit(1)
		}
		return
	}
	if cfg.burst < 0 {
		cfg.burst = max(0, cfg.length-1<<10)
	}
	if err := check(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "trickle:", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "trickle:", err)
		os.Exit(1)
	}
}

func check(cfg config) error {
	switch {
	case cfg.server != "header" && cfg.server != "full":
		return fmt.Errorf("-server is %q, want header or full", cfg.server)
	case cfg.conns < 0 || cfg.idle < 0 || cfg.warmup < 0:
		return fmt.Errorf("-conns, -idle and -warmup must not be negative")
	case cfg.length <= 0 || cfg.burst > cfg.length:
		return fmt.Errorf("-length must be positive and -burst at most -length")
	case cfg.rate <= 0 || cfg.every <= 0 || cfg.duration <= 0 || cfg.sample <= 0:
		return fmt.Errorf("-rate, -every, -duration and -sample must be positive")
	}
	return nil
}
