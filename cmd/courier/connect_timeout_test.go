package main

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAServerThatNeverAnswersIsGivenUpOn: a PostgreSQL address that takes
// the connection and never answers (a server stopped mid-failover, a
// firewall that swallows packets) is given up on after the tool's connect
// timeout (5 seconds a try, two tries), when the connection string and $PGCONNECT_TIMEOUT
// set none: health from cron or a monitor exits 1. It waited until it was
// interrupted, for ever from cron.
func TestAServerThatNeverAnswersIsGivenUpOn(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	port := strings.TrimPrefix(ln.Addr().String(), "127.0.0.1:")
	for name, db := range map[string]string{
		"url":           "postgres://app@127.0.0.1:" + port + "/app?sslmode=disable",
		"keyword/value": "host=127.0.0.1 port=" + port + " user=app dbname=app sslmode=disable",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			done := make(chan struct{})
			var code int
			var errOut string
			go func() {
				defer close(done)
				code, _, errOut = courierRun(t, "health", "-db", db)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatalf("courier health against a server that never answers has not returned after a minute")
			}
			if code != exitFailed {
				t.Errorf("courier health against a server that never answers: exit %d, stderr %q; want %d", code, errOut, exitFailed)
			}
		})
	}
}
