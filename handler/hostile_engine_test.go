package handler_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// Attacks that hold the database's side to account, on each engine: a
// body that trickles in holds no connection of the store's while it
// does; a body cut mid-way by its client stores nothing and leaks no
// connection; no secret reaches the handler's log, whatever is refused.

// engineRig is one receiver on a store of an engine, behind a server
// whose requests' bodies report when they wait for more bytes.
type engineRig struct {
	store  *store.Store
	server *httptest.Server
	// sign signs r's header lines for body.
	sign func(t *testing.T, r *http.Request, body []byte)
	body []byte
	// waiting gets one value each time a request's body read waits for
	// bytes not yet arrived (a Read after the first that returned any).
	waiting chan struct{}
	calls   *atomic.Int32
	// events gets the Event of each request answered.
	events chan handler.Event
	logs   *syncBuffer
	secret string
}

// watchedBody reports, once it has returned some bytes, each further Read.
type watchedBody struct {
	io.ReadCloser
	read    bool
	waiting chan<- struct{}
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.read {
		select {
		case b.waiting <- struct{}{}:
		default:
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.read = b.read || n > 0
	return n, err
}

func engineEffect[T ack.Notification](calls *atomic.Int32) handler.Func[T] {
	return func(ctx context.Context, tx *sqlx.Tx, n T) error {
		calls.Add(1)
		_, err := tx.ExecContext(ctx, tx.Rebind("INSERT INTO hostile_effects (id) VALUES (?)"), n.DedupeKey())
		return err
	}
}

// openEngineRig serves kind ("Terminal" or "Reporting") on s.
func openEngineRig(t *testing.T, s *store.Store, kind string) *engineRig {
	t.Helper()
	if _, err := s.DB().Exec("CREATE TABLE hostile_effects (id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	rig := &engineRig{store: s, waiting: make(chan struct{}, 1), calls: new(atomic.Int32), events: make(chan handler.Event, 64), logs: new(syncBuffer)}
	hook := func(e handler.Event) { rig.events <- e }
	logger := slog.New(slog.NewTextHandler(rig.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	origin := "http://" + srv.Listener.Addr().String()
	var h http.Handler
	switch kind {
	case "Terminal":
		key, forms := standardWebhooksKey(t, "k1")
		rig.secret = forms[1] // the base64 part, in whatever form a log might show it
		v, signer := swVerifier(t, key), swSigner(t, key)
		_, rig.body = hostileTerminal(func(*ack.Terminal) {})
		rig.sign = func(t *testing.T, r *http.Request, body []byte) {
			t.Helper()
			var n struct {
				ID string `json:"notification_id"`
			}
			if err := json.Unmarshal(body, &n); err != nil {
				t.Fatal(err)
			}
			if err := signer.Sign(r, signature.Message{ID: n.ID, Body: body, Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: v, Logger: logger, Hook: hook}, engineEffect[ack.Terminal](rig.calls))
		if err != nil {
			t.Fatal(err)
		}
		h = rcv
	case "Reporting":
		key, err := signature.GenerateJWK("seller-key-1", signature.AlgEd25519)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		v, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{Sender: "seller.example", Keys: []signature.JWK{key.Public()}, Replay: s.Replay, Origin: origin})
		if err != nil {
			t.Fatal(err)
		}
		rig.body = hostileReportingTarget().valid(t).body
		rig.sign = func(t *testing.T, r *http.Request, body []byte) {
			t.Helper()
			if err := signer.Sign(r, signature.Message{Body: body, Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		rp, err := handler.NewReporting(handler.ReportingConfig{Store: s, Verifier: v, Logger: logger, Hook: hook}, engineEffect[ack.Reporting](rig.calls))
		if err != nil {
			t.Fatal(err)
		}
		h = rp
	}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &watchedBody{ReadCloser: r.Body, waiting: rig.waiting}
		h.ServeHTTP(w, r)
	})
	srv.Start()
	rig.server = srv
	return rig
}

// signForHTTP1 makes req a JSON request of body signed as addressed to
// the rig's HTTP/1 server, whatever server it is sent to: the Origin the
// RFC 9421 verifier was given is that server's.
func (rig *engineRig) signForHTTP1(t *testing.T, req *http.Request, body []byte) {
	t.Helper()
	req.Header.Set("Content-Type", "application/json")
	as := req.Clone(req.Context())
	as.URL.Host = rig.server.Listener.Addr().String()
	as.Host = as.URL.Host
	rig.sign(t, as, body)
	req.Header = as.Header
}

// eachEngineRig runs test on a rig of each receiver kind on each engine,
// each in a parallel subtest of its own.
func eachEngineRig(t *testing.T, kinds []string, test func(t *testing.T, rig *engineRig)) {
	for _, engine := range engines {
		for _, kind := range kinds {
			t.Run(engine.name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				test(t, openEngineRig(t, engine.open(t), kind))
			})
		}
	}
}

// head returns the request line and header lines of a signed POST of
// body, framed by Content-Length, and the blank line.
func (rig *engineRig) head(t *testing.T, body []byte) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, rig.server.URL+"/hooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	rig.sign(t, req, body)
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /hooks HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", req.Host, len(body))
	if err := req.Header.Write(&b); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\r\n")
	return b.String()
}

func (rig *engineRig) written(t *testing.T) (inbox, effects int) {
	t.Helper()
	return rows(t, rig.store, "courier_inbox"), rows(t, rig.store, "hostile_effects")
}

// TestATricklingBodyHoldsNoConnection: a body that arrives a piece at a
// time, as a slowloris sends it, is read whole before the receiver asks
// its store anything: while the body waits, no connection of the store's
// pool is in use, so that slow clients cannot take the pool (or SQLite's
// one writer) from the rest. Once the rest arrives the notification is
// accepted; a body cut there by its client instead is refused 400 and
// leaves no connection in use.
func TestATricklingBodyHoldsNoConnection(t *testing.T) {
	t.Parallel()
	eachEngineRig(t, []string{"Terminal", "Reporting"}, func(t *testing.T, rig *engineRig) {
		for _, cut := range []bool{true, false} {
			conn, err := net.Dial("tcp", rig.server.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			half := len(rig.body) / 2
			if _, err := io.WriteString(conn, rig.head(t, rig.body)+string(rig.body[:half])); err != nil {
				t.Fatal(err)
			}
			<-rig.waiting
			if inUse := rig.store.DB().Stats().InUse; inUse != 0 {
				t.Fatalf("%d connections of the store in use while the body trickles in, want 0", inUse)
			}
			if cut {
				if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
					t.Fatal(err)
				}
			} else if _, err := conn.Write(rig.body[half:]); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			conn.Close()
			select { // the body's reads are over once it was answered
			case <-rig.waiting:
			default:
			}
			inbox, effects := rig.written(t)
			switch {
			case cut:
				wantRawProblem(t, resp.StatusCode, resp.Header, out, http.StatusBadRequest, courier.CodeInvalidArgument)
				if inbox != 0 || effects != 0 || rig.calls.Load() != 0 {
					t.Fatalf("a body cut short wrote %d Inbox records and %d effects, in %d calls", inbox, effects, rig.calls.Load())
				}
			case resp.StatusCode != http.StatusOK || inbox != 1 || effects != 1 || rig.calls.Load() != 1:
				t.Fatalf("answered %d %q, %d Inbox records, %d effects, %d calls; want 200 and 1, 1, 1", resp.StatusCode, out, inbox, effects, rig.calls.Load())
			}
		}
		if inUse := rig.store.DB().Stats().InUse; inUse != 0 {
			t.Fatalf("%d connections of the store in use after every answer, want 0", inUse)
		}
		if logs := rig.logs.String(); rig.secret != "" && strings.Contains(logs, rig.secret) {
			t.Fatalf("the log holds the secret: %s", logs)
		}
	})
}

// TestConcurrentDeliveriesOverOneHTTP2Connection: one notification and
// another for the same event (a collision), each sent many times at once
// as streams of one HTTP/2 connection: the application's function runs
// once; every copy of the one that won is answered 200 with the same
// bytes, every copy of the other 409 idempotency_collision; no
// connection of the store's is left in use.
func TestConcurrentDeliveriesOverOneHTTP2Connection(t *testing.T) {
	t.Parallel()
	const copies = 16
	eachEngineRig(t, []string{"Terminal"}, func(t *testing.T, rig *engineRig) {
		_, other := hostileTerminal(func(n *ack.Terminal) { n.PlanID = "plan-2" })
		url, client := serveHTTP2(t, rig.server.Config.Handler, false)
		type answer struct {
			group  int
			status int
			proto  int
			ctype  string
			body   []byte
		}
		answers := make(chan answer, 2*copies)
		var wg sync.WaitGroup
		for i := range 2 * copies {
			group := i % 2
			body := [][]byte{rig.body, other}[group]
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/hooks", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			rig.sign(t, req, body)
			wg.Go(func() {
				resp, err := client.Do(req)
				if err != nil {
					answers <- answer{group: group}
					return
				}
				defer resp.Body.Close()
				out, _ := io.ReadAll(resp.Body)
				answers <- answer{group, resp.StatusCode, resp.ProtoMajor, resp.Header.Get("Content-Type"), out}
			})
		}
		wg.Wait()
		close(answers)
		var won [2]int
		var ack []byte
		winner := -1
		got := make([][]answer, 2)
		for a := range answers {
			got[a.group] = append(got[a.group], a)
			if a.status == http.StatusOK {
				won[a.group]++
				winner = a.group
			}
		}
		if winner < 0 || won[winner] != copies || won[1-winner] != 0 {
			t.Fatalf("200s by group %v, want %d for one group and none for the other: %+v", won, copies, got)
		}
		for _, a := range got[winner] {
			if a.proto != 2 || ack != nil && !bytes.Equal(a.body, ack) {
				t.Fatalf("the winner's copies answered differently: %q and %q (HTTP/%d)", ack, a.body, a.proto)
			}
			ack = a.body
		}
		for _, a := range got[1-winner] {
			wantRawProblem(t, a.status, http.Header{"Content-Type": {a.ctype}}, a.body, http.StatusConflict, courier.CodeIdempotencyCollision)
		}
		if inbox, effects := rig.written(t); inbox != 1 || effects != 1 || rig.calls.Load() != 1 {
			t.Fatalf("%d Inbox records, %d effects, %d calls; want 1, 1, 1", inbox, effects, rig.calls.Load())
		}
		if inUse := rig.store.DB().Stats().InUse; inUse != 0 {
			t.Fatalf("%d connections of the store in use after every answer, want 0", inUse)
		}
	})
}

// TestAnHTTP2StreamResetMidBodyStoresNothing: a sender that resets its
// HTTP/2 stream halfway through the body (its request cancelled) leaves
// the connection serving: the stream's handler refuses what it read, 400
// invalid_argument, without asking the store, and the next request on
// the same connection is accepted once.
func TestAnHTTP2StreamResetMidBodyStoresNothing(t *testing.T) {
	t.Parallel()
	eachEngineRig(t, []string{"Terminal", "Reporting"}, func(t *testing.T, rig *engineRig) {
		url, client := serveHTTP2(t, rig.server.Config.Handler, false)
		ctx, cancel := context.WithCancel(t.Context())
		pr, pw := io.Pipe()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/hooks", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(rig.body))
		rig.signForHTTP1(t, req, rig.body)
		done := make(chan error, 1)
		go func() {
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		if _, err := pw.Write(rig.body[:len(rig.body)/2]); err != nil {
			t.Fatal(err)
		}
		<-rig.waiting
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the cancelled request got an answer")
		}
		pw.Close()
		if e := <-rig.events; e.HTTPStatus != http.StatusBadRequest || e.Code != courier.CodeInvalidArgument {
			t.Fatalf("the reset stream was answered %+v, want 400 invalid_argument", e)
		}
		if inbox, effects := rig.written(t); inbox != 0 || effects != 0 || rig.calls.Load() != 0 {
			t.Fatalf("a reset stream wrote %d Inbox records and %d effects, in %d calls", inbox, effects, rig.calls.Load())
		}
		if inUse := rig.store.DB().Stats().InUse; inUse != 0 {
			t.Fatalf("%d connections of the store in use, want 0", inUse)
		}
		next, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/hooks", bytes.NewReader(rig.body))
		if err != nil {
			t.Fatal(err)
		}
		rig.signForHTTP1(t, next, rig.body)
		resp, out := exchangeWith(t, client, next)
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 || rig.calls.Load() != 1 {
			t.Fatalf("the next request answered HTTP/%d %d %q after %d calls, want HTTP/2 200 after 1", resp.ProtoMajor, resp.StatusCode, out, rig.calls.Load())
		}
	})
}
