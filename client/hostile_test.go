package client_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/store"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
)

// rawServer accepts connections on loopback and, for each, reads one
// request (headers and body) and hands the connection to script. It
// returns the server's URL. Connections are closed at cleanup.
func rawServer(t *testing.T, script func(c net.Conn, r *http.Request, body []byte)) string {
	t.Helper()
	return rawListener(t, func(c net.Conn) {
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		body, _ := io.ReadAll(r.Body)
		script(c, r, body)
	})
}

// rawListener accepts connections on loopback and serves each on a
// goroutine of its own. It returns the server's URL; at cleanup the
// listener and every connection are closed and serve has returned.
func rawListener(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// rawBundle is a worker bundle whose worker sends to a raw server. Its
// Timeout only bounds a stuck attempt: a test whose receiver holds its
// answer past the Timeout sets a shorter one. A short one here could run
// out first on a loaded machine, before an answer sent at once came, and
// make the attempt a timeout, not what the answer gives.
func rawBundle(t *testing.T, script func(c net.Conn, r *http.Request, body []byte), edit func(*client.Config)) *workerBundle {
	t.Helper()
	rawURL := rawServer(t, script)
	b := setupWorker(t, func(http.ResponseWriter, *http.Request) {}, nil)
	cfg := client.Config{
		Store:     b.store,
		Owner:     "test-worker",
		Signer:    signerFor(t, b),
		Transport: loopbackGuard(t, rawURL).Transport(),
		Timeout:   30 * time.Second,
		Lease:     time.Minute,
		Backoff:   client.ExponentialBackoff(time.Second, time.Minute, 0),
		Hook:      func(e client.Event) { b.events <- e },
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := client.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.worker = w
	b.server.URL = rawURL // enqueue targets it
	return b
}

// workBounded runs Work and fails the test if it has not returned within
// limit: the attempt is stuck.
func workBounded(t *testing.T, b *workerBundle, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.worker.Work(t.Context())
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("Work still running %v after it began: the attempt is stuck", limit)
	}
}

// TestSwitchingProtocolsDoesNotHangTheAttempt: a receiver answers the POST
// with 101 Switching Protocols and then keeps the connection open, silent.
// The attempt ends as the 101 comes, long before its Timeout, failed with
// receiver_rejected (DefaultClassify's table).
func TestSwitchingProtocolsDoesNotHangTheAttempt(t *testing.T) {
	t.Parallel()
	b := rawBundle(t, func(c net.Conn, r *http.Request, body []byte) {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(io.Discard, c) // hold it open until cleanup
	}, nil)
	id := b.enqueue(t, "n-1", `{"n":1}`)
	workBounded(t, b, 15*time.Second) // half the attempt's Timeout
	d := b.get(t, id)
	// A final 1xx is no answer to judge: DefaultClassify fails it, as a
	// status of 600 or more.
	if d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeReceiverRejected || d.LastHTTPStatus != http.StatusSwitchingProtocols || d.Attempts != 1 {
		t.Fatalf("delivery %s/%s (HTTP %d) after %d attempts, want failed/receiver_rejected (HTTP 101) after 1", d.Status, d.LastErrorCode, d.LastHTTPStatus, d.Attempts)
	}
}

func rawAck(id string, body []byte) []byte { a := ack.New(id, body); return a.Marshal() }

func writeResp(c net.Conn, head string, body []byte) {
	io.WriteString(c, head+"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n")
	c.Write(body)
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// TestAnEndlessRefusalIsReadOnlyInPart: a receiver answers 503 (a
// problem, and plain text) with an endless body. The worker reads a few
// KiB of a refusal, for its code, and hangs up: the receiver cannot push
// more into it than the sockets' buffers hold, where an unbounded read
// would go on until the attempt's Timeout, hundreds of MiB over loopback.
func TestAnEndlessRefusalIsReadOnlyInPart(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"application/problem+json", "text/plain"} {
		t.Run(ct, func(t *testing.T) {
			var sent atomic.Int64
			b := rawBundle(t, func(c net.Conn, r *http.Request, body []byte) {
				io.WriteString(c, "HTTP/1.1 503 Busy\r\nContent-Type: "+ct+"\r\nTransfer-Encoding: chunked\r\n\r\n")
				chunk := []byte("1000\r\n" + strings.Repeat(" ", 0x1000) + "\r\n")
				for {
					n, err := c.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			}, func(c *client.Config) { c.Timeout = 2 * time.Second })
			id := b.enqueue(t, "n-1", `{"n":1}`)
			workBounded(t, b, 10*time.Second)
			if d := b.get(t, id); d.Status != courier.StatusRetryWait || d.LastHTTPStatus != 503 {
				t.Fatalf("delivery %s, HTTP %d; want retry_wait after a 503", d.Status, d.LastHTTPStatus)
			}
			if n := sent.Load(); n > 32<<20 {
				t.Fatalf("the receiver pushed %d MiB of a refusal into the worker: the read is not bounded", n>>20)
			}
		})
	}
}

// TestHostileReceivers probes the attempt's classification against
// receivers that misbehave at the byte level.
func TestHostileReceivers(t *testing.T) {
	t.Parallel()
	// 50 MiB of "a" in 52 KB: fifty gzip members of 1 MiB each, one
	// stream to a reader (gzip is multistream), compressed in a tenth of
	// the time 50 MiB takes under the race detector.
	bomb := bytes.Repeat(gz(bytes.Repeat([]byte("a"), 1<<20)), 50)
	// A Retry-After date has a second's resolution, and the test reads the
	// delivery some time after the receiver wrote it: one in 30s is taken
	// as at least 20s from then, which no backoff of the worker's (1s) is.
	future := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }
	type want struct {
		status courier.Status
		code   courier.Code
		http   int
		delay  [2]time.Duration // retry delay range, when retried
	}
	// Only the trickled Ack, whose outcome is a timeout, lasts past the
	// attempt's Timeout; every other answer ends the attempt by itself,
	// and its attempt has a Timeout that only bounds a stuck attempt. A
	// short Timeout could run out first on a loaded machine, before the
	// answer (or, for the trickled Ack, its headers) came, and make the
	// attempt a timeout with no HTTP status, not what the answer gives.
	// The trickle lasts seconds past even the trickled Ack's Timeout.
	const trickled, guard = 2 * time.Second, 30 * time.Second
	tests := []struct {
		name   string
		script func(c net.Conn, r *http.Request, body []byte)
		want   want
	}{
		{"ack trickled past the timeout", func(c net.Conn, r *http.Request, body []byte) {
			a := rawAck(r.Header.Get("webhook-id"), body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(a))+"\r\n\r\n")
			for _, x := range a {
				if _, err := c.Write([]byte{x}); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond) // the receiver's trickle, not synchronization
			}
		}, want{courier.StatusRetryWait, courier.CodeTimeout, 200, [2]time.Duration{time.Second, time.Second}}},
		{"endless 200 body", func(c net.Conn, r *http.Request, body []byte) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			chunk := []byte("1000\r\n" + strings.Repeat("x", 0x1000) + "\r\n")
			for {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}, want{courier.StatusFailed, courier.CodeAckInvalid, 200, [2]time.Duration{}}},
		{"huge headers", func(c net.Conn, r *http.Request, body []byte) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			for i := 0; i < 2000; i++ {
				if _, err := io.WriteString(c, "X-Pad-"+strconv.Itoa(i)+": "+strings.Repeat("p", 100)+"\r\n"); err != nil {
					return
				}
			}
			io.WriteString(c, "\r\n")
		}, want{courier.StatusRetryWait, courier.CodeNetwork, 0, [2]time.Duration{time.Second, time.Second}}},
		{"reset mid-body", func(c net.Conn, r *http.Request, body []byte) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"schema\":")
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}, want{courier.StatusRetryWait, courier.CodeNetwork, 200, [2]time.Duration{time.Second, time.Second}}},
		{"close after each response", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n", rawAck(r.Header.Get("webhook-id"), body))
			c.Close()
		}, want{courier.StatusSucceeded, "", 200, [2]time.Duration{}}},
		{"ack for another id", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 200 OK\r\n", rawAck("n-other", body))
		}, want{courier.StatusFailed, courier.CodeAckInvalid, 200, [2]time.Duration{}}},
		{"truncated ack", func(c net.Conn, r *http.Request, body []byte) {
			a := rawAck(r.Header.Get("webhook-id"), body)
			writeResp(c, "HTTP/1.1 200 OK\r\n", a[:len(a)-3])
		}, want{courier.StatusFailed, courier.CodeAckInvalid, 200, [2]time.Duration{}}},
		{"ack padded over the bound", func(c net.Conn, r *http.Request, body []byte) {
			a := rawAck(r.Header.Get("webhook-id"), body)
			writeResp(c, "HTTP/1.1 200 OK\r\n", append(a, bytes.Repeat([]byte(" "), 17<<10)...))
		}, want{courier.StatusFailed, courier.CodeAckInvalid, 200, [2]time.Duration{}}},
		{"gzipped ack", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n", gz(rawAck(r.Header.Get("webhook-id"), body)))
		}, want{courier.StatusSucceeded, "", 200, [2]time.Duration{}}},
		{"200 gzip label on a plain ack", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n", rawAck(r.Header.Get("webhook-id"), body))
		}, want{courier.StatusFailed, courier.CodeAckInvalid, 200, [2]time.Duration{}}},
		{"gzip bomb 200", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n", bomb)
		}, want{courier.StatusFailed, courier.CodeAckInvalid, 200, [2]time.Duration{}}},
		{"early hints then ack", func(c net.Conn, r *http.Request, body []byte) {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\n")
			writeResp(c, "HTTP/1.1 200 OK\r\n", rawAck(r.Header.Get("webhook-id"), body))
		}, want{courier.StatusSucceeded, "", 200, [2]time.Duration{}}},
		{"endless 1xx", func(c net.Conn, r *http.Request, body []byte) {
			for {
				if _, err := io.WriteString(c, "HTTP/1.1 102 Processing\r\n\r\n"); err != nil {
					return
				}
			}
		}, want{courier.StatusRetryWait, courier.CodeNetwork, 0, [2]time.Duration{time.Second, time.Second}}},
		{"503 Retry-After date in 30s", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 503 Busy\r\nRetry-After: "+future(30*time.Second)+"\r\n", nil)
		}, want{courier.StatusRetryWait, courier.CodeReceiverUnavailable, 503, [2]time.Duration{20 * time.Second, 30 * time.Second}}},
		{"503 Retry-After date in the past", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 503 Busy\r\nRetry-After: "+future(-time.Hour)+"\r\n", nil)
		}, want{courier.StatusRetryWait, courier.CodeReceiverUnavailable, 503, [2]time.Duration{time.Second, time.Second}}},
		{"503 Retry-After date far in the future", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 503 Busy\r\nRetry-After: Fri, 31 Dec 9999 23:59:59 GMT\r\n", nil)
		}, want{courier.StatusRetryWait, courier.CodeReceiverUnavailable, 503, [2]time.Duration{time.Minute, time.Minute}}},
		{"503 Retry-After garbage", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 503 Busy\r\nRetry-After: soon\r\n", nil)
		}, want{courier.StatusRetryWait, courier.CodeReceiverUnavailable, 503, [2]time.Duration{time.Second, time.Second}}},
		{"429 Retry-After repeated", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 429 Slow down\r\nRetry-After: 20\r\nRetry-After: 40\r\n", nil)
		}, want{courier.StatusRetryWait, courier.CodeRateLimited, 429, [2]time.Duration{20 * time.Second, 20 * time.Second}}},
		{"429 Retry-After 0", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 429 Slow down\r\nRetry-After: 0\r\n", nil)
		}, want{courier.StatusRetryWait, courier.CodeRateLimited, 429, [2]time.Duration{time.Second, time.Second}}},
		{"408 Retry-After 9", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 408 Timeout\r\nRetry-After: 9\r\n", nil)
		}, want{courier.StatusRetryWait, courier.CodeRequestTimeout, 408, [2]time.Duration{9 * time.Second, 9 * time.Second}}},
		{"503 problem trickled", func(c net.Conn, r *http.Request, body []byte) {
			io.WriteString(c, "HTTP/1.1 503 Busy\r\nContent-Type: application/problem+json\r\nContent-Length: 1000\r\n\r\n")
			for {
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}, want{courier.StatusRetryWait, courier.CodeReceiverUnavailable, 503, [2]time.Duration{time.Second, time.Second}}},
		{"302 to ftp", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 302 Found\r\nLocation: ftp://example.com/x\r\n", nil)
		}, want{courier.StatusFailed, courier.CodeDestinationForbidden, 302, [2]time.Duration{}}},
		{"302 to ipv4-mapped loopback", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 302 Found\r\nLocation: https://[::ffff:169.254.169.254]/x\r\n", nil)
		}, want{courier.StatusFailed, courier.CodeDestinationForbidden, 302, [2]time.Duration{}}},
		{"302 to self (loop)", func(c net.Conn, r *http.Request, body []byte) {
			writeResp(c, "HTTP/1.1 302 Found\r\nLocation: "+r.URL.Path+"\r\n", nil)
		}, want{courier.StatusFailed, courier.CodeRedirect, 302, [2]time.Duration{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			timeout := guard
			if tt.want.code == courier.CodeTimeout {
				timeout = trickled
			}
			b := rawBundle(t, tt.script, func(c *client.Config) { c.Timeout = timeout })
			id := b.enqueue(t, "n-1", `{"n":1}`)
			workBounded(t, b, 2*timeout)
			d := b.get(t, id)
			atts, err := b.store.Outbox.Attempts(t.Context(), id)
			if err != nil || len(atts) != 1 {
				t.Fatalf("attempts %+v, %v", atts, err)
			}
			a := atts[0]
			if d.Status != tt.want.status || d.LastErrorCode != tt.want.code || d.LastHTTPStatus != tt.want.http {
				t.Errorf("delivery %s/%s http %d, want %s/%s http %d", d.Status, d.LastErrorCode, d.LastHTTPStatus, tt.want.status, tt.want.code, tt.want.http)
			}
			if a.ErrorCode != tt.want.code || a.HTTPStatus != tt.want.http {
				t.Errorf("attempt row %s http %d, want %s http %d", a.ErrorCode, a.HTTPStatus, tt.want.code, tt.want.http)
			}
			if d.LeaseOwner != "" {
				t.Errorf("still leased")
			}
			if d.Status == courier.StatusRetryWait {
				got := d.NextAttemptAt.Sub(b.clock.Now())
				if got < tt.want.delay[0] || got > tt.want.delay[1] {
					t.Errorf("retry in %v, want %v..%v", got, tt.want.delay[0], tt.want.delay[1])
				}
			}
		})
	}
}

// TestGuardRefusesLoopbackSpellings sends through the worker to loopback
// under spellings a resolver may accept (decimal, octal, hex, short
// forms, localhost, unspecified), with the guard open for http and the
// port but not for loopback, a receiver listening on every local address,
// and HTTP_PROXY pointing at the receiver. IP literals are refused without
// a lookup. Every other name is looked up with a resolver that answers as
// a hostile DNS server or libc's inet_aton would (loopback, unspecified,
// IPv4-mapped loopback, or a public address beside a loopback one), so the
// verdict does not depend on the machine's DNS: the guard must refuse every
// answer, whatever the name. Last, a guard open for loopback sends one of
// the names on to the receiver, so that the receiver hearing nothing before
// comes of the refusals, not of a receiver out of reach.
func TestGuardRefusesLoopbackSpellings(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:"+strconv.Itoa(port))
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:"+strconv.Itoa(port))
	url := func(host string) string { return "http://" + host + ":" + strconv.Itoa(port) + "/x" }

	// refused sends one delivery to each host through a worker whose guard
	// resolves with resolve, and fails the test unless each is refused with
	// destination_forbidden.
	refused := func(t *testing.T, hosts []string, resolve func(context.Context, string) ([]netip.Addr, error)) {
		b := setupWorker(t, func(http.ResponseWriter, *http.Request) {}, nil)
		g := client.Guard{AllowHTTP: true, AllowPorts: []uint16{uint16(port)}, Resolve: resolve}
		w, err := client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b), Transport: g.Transport()})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := b.store.DB().BeginTxx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[int64]string{}
		for i, h := range hosts {
			e, err := b.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "n-" + strconv.Itoa(i), Endpoint: url(h), Payload: []byte(`{}`)})
			if err != nil {
				t.Fatalf("%s: enqueue refused, so the guard never sees it: %v", h, err)
			}
			ids[e.ID] = h
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
		for id, h := range ids {
			d := b.get(t, id)
			t.Logf("%-28s %s/%s", h, d.Status, d.LastErrorCode)
			if d.LastErrorCode != courier.CodeDestinationForbidden {
				t.Errorf("%s: %s/%s, want destination_forbidden", h, d.Status, d.LastErrorCode)
			}
		}
	}

	t.Run("literals", func(t *testing.T) {
		refused(t, []string{"127.0.0.1", "[::1]", "[::]", "0.0.0.0", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]"},
			func(_ context.Context, host string) ([]netip.Addr, error) {
				t.Errorf("resolver asked for the IP literal %q", host)
				return nil, errors.New("no lookups here")
			})
	})

	answers := map[string][]string{
		"2130706433":       {"127.0.0.1"},
		"0177.0.0.1":       {"127.0.0.1"},
		"0x7f.0.0.1":       {"127.0.0.1"},
		"0x7f000001":       {"127.0.0.1"},
		"127.1":            {"127.0.0.1"},
		"127.0.1":          {"127.0.0.1"},
		"0":                {"0.0.0.0"},
		"localhost":        {"127.0.0.1", "::1"},
		"localhost.":       {"::1", "127.0.0.1"},
		"ip6-localhost":    {"::1"},
		"unspecified.test": {"::"},
		"mapped.test":      {"::ffff:127.0.0.1"},
		"rebind.test":      {"93.184.215.14", "127.0.0.1"},
	}
	var mu sync.Mutex
	asked := map[string]int{}
	hostile := func(_ context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		asked[host]++
		mu.Unlock()
		as, ok := answers[host]
		if !ok {
			t.Errorf("resolver asked for %q, which it does not know", host)
			return nil, errors.New("unknown name")
		}
		var out []netip.Addr
		for _, a := range as {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
	// A name with the root's trailing dot never enters the outbox (the
	// store refuses it, invalid_argument): the guard sees it only from a
	// database written before that rule, and refuses it alone.
	const rooted = "localhost."
	t.Run("names", func(t *testing.T) {
		names := slices.DeleteFunc(slices.Sorted(maps.Keys(answers)), func(h string) bool { return h == rooted })
		refused(t, names, hostile)
		mu.Lock()
		defer mu.Unlock()
		for _, h := range names {
			if asked[h] == 0 {
				t.Errorf("%s: refused without asking the resolver", h)
			}
		}
	})
	t.Run("rooted name", func(t *testing.T) {
		b := setupWorker(t, func(http.ResponseWriter, *http.Request) {}, nil)
		tx, err := b.store.DB().BeginTxx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		_, err = b.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "n-rooted", Endpoint: url(rooted), Payload: []byte(`{}`)})
		if !errors.Is(err, courier.CodeInvalidArgument) {
			t.Errorf("Enqueue to %s = %v, want invalid_argument", rooted, err)
		}
		g := client.Guard{AllowHTTP: true, AllowPorts: []uint16{uint16(port)}, Resolve: hostile}
		c := &http.Client{Transport: g.Transport()}
		defer c.CloseIdleConnections()
		resp, err := c.Get(url(rooted))
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, courier.CodeDestinationForbidden) {
			t.Errorf("the guard sent %s on: %v, want destination_forbidden", rooted, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if asked[rooted] == 0 {
			t.Errorf("%s: refused without asking the resolver", rooted)
		}
	})

	if n := hits.Load(); n != 0 {
		t.Fatalf("receiver on loopback got %d requests", n)
	}

	open := client.Guard{AllowHTTP: true, AllowPorts: []uint16{uint16(port)}, Resolve: hostile,
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	c := &http.Client{Transport: open.Transport()}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url("2130706433"))
	if err != nil {
		t.Fatalf("a guard open for loopback: %v", err)
	}
	resp.Body.Close()
	if n := hits.Load(); n != 1 {
		t.Fatalf("a guard open for loopback sent 2130706433 on; the receiver got %d requests, want 1", n)
	}
}

// TestSwitchingProtocolsDoesNotOutliveStop: with a receiver that answers
// 101 and goes silent, Stop's context ends and the attempt in flight must
// be cut short, so Run returns (Worker doc: "Run and Work return when they
// are done, bounded by what is left of their leases").
func TestSwitchingProtocolsDoesNotOutliveStop(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	b := rawBundle(t, func(c net.Conn, r *http.Request, body []byte) {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: Upgrade\r\n\r\n")
		arrived <- struct{}{}
		io.Copy(io.Discard, c)
	}, nil)
	id := b.enqueue(t, "n-1", `{"n":1}`)
	runErr := make(chan error, 1)
	go func() { runErr <- b.worker.Run(context.Background()) }()
	<-arrived
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := b.worker.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("Stop = %v", err)
	}
	select {
	case <-runErr:
	case <-time.After(5 * time.Second):
		d := b.get(t, id)
		t.Fatalf("Run has not returned 5s after Stop cut attempts short (Timeout 30s); delivery %s leased by %q until %v", d.Status, d.LeaseOwner, d.LeaseExpiresAt.Sub(b.clock.Now()))
	}
}

// TestSwitchingProtocolsTakesEverySlot: an attempt a 101 receiver
// answered pinned its slot for good (the answer's body is the raw
// connection), so two of them, to two endpoints of that receiver, left a
// worker with two slots delivering nothing to a healthy endpoint. (It
// once made the second 101 attempt by letting the first one's lease run
// out, which raced with that attempt's own settle: a 101 fails the
// delivery for good.)
func TestSwitchingProtocolsTakesEverySlot(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 10)
	b := rawBundle(t, func(c net.Conn, r *http.Request, body []byte) {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: evil\r\nConnection: Upgrade\r\n\r\n")
		arrived <- struct{}{}
		io.Copy(io.Discard, c)
	}, nil)
	healthy := make(chan struct{}, 1)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Write(rawAck(r.Header.Get("webhook-id"), body))
		healthy <- struct{}{}
	}))
	defer good.Close()
	gh, bh := loopbackGuard(t, good.URL), loopbackGuard(t, b.server.URL)
	g := client.Guard{AllowHTTP: true, AllowPorts: append(gh.AllowPorts, bh.AllowPorts...), AllowPrefixes: gh.AllowPrefixes}
	// The Timeout only bounds a stuck attempt: the 101 attempts must free
	// their slots as their answers come, not as their Timeout runs out.
	w, err := client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b), Transport: g.Transport(), Timeout: 30 * time.Second,
		Lease: time.Minute, Concurrency: 2, EndpointConcurrency: 1, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran }) // before the store closes
	enqueueAll(t, b.store, plain(b.server.URL+"/a", "n-1"), plain(b.server.URL+"/b", "n-2"))
	<-arrived
	<-arrived // an attempt in each slot, each answered 101
	enqueueAll(t, b.store, plain(good.URL+"/hooks", "n-good"))
	select {
	case <-healthy:
	case <-time.After(5 * time.Second):
		t.Fatal("a healthy endpoint got nothing in 5s: both slots are held by attempts a 101 receiver answered")
	}
}
