package main

import (
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier/couriertest"
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

// TestAPasswordHoldingAQuestionMarkNamesTheDatabaseItNamed: pgx, as
// libpq, ends a URL's userinfo at its @, so a password may hold a ? not
// percent-encoded. The tool took that ? for the start of the query and
// added its connect_timeout after "&", to the database name: "database
// \"app&connect_timeout=5\" does not exist", exit 1, for a URL psql
// takes. It connects to the database the URL names.
func TestAPasswordHoldingAQuestionMarkNamesTheDatabaseItNamed(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(couriertest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.User.Password(); ok {
		t.Skip("the server's URL has a password of its own")
	}
	if q := u.Query(); len(q) > 1 || (len(q) == 1 && q.Get("sslmode") == "") {
		t.Skipf("the server's URL needs parameters besides sslmode: %v", slices.Collect(maps.Keys(q)))
	}
	// No query: the ? in the password is the URL's only one.
	db := "postgres://" + u.User.Username() + ":s3?cret@" + u.Host + u.Path
	if out := mustRun(t, exitOK, "migrate", "-db", db); !strings.HasPrefix(out, "migrated: schema version ") {
		t.Fatalf("migrate: %q", out)
	}
	mustRun(t, exitOK, "health", "-db", db)
}
