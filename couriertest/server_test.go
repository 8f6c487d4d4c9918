package couriertest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/testmain"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
)

// TestMain is couriertest.Main's own run with goleak's check after it.
func TestMain(m *testing.M) { testmain.Main(m) }

// ackHandler answers every request with courier's Ack for its body and
// counts the requests that reached it.
func ackHandler(calls *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
	})
}

// post sends body under id and returns the status, the body and the error.
func post(ctx context.Context, srv *couriertest.Server, id string, body []byte) (int, []byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
	req.Header.Set("webhook-id", id)
	resp, err := srv.Client().Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func TestSequence(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := couriertest.NewServer(ackHandler(&calls), couriertest.Sequence(
		couriertest.Fault{Status: 503, RetryAfter: "2"},
		couriertest.Fault{WrongAck: true},
		couriertest.Fault{DropAfterCommit: true},
	))
	defer srv.Close()
	body := []byte(`{"n":1}`)
	if st, _, err := post(t.Context(), srv, "n-1", body); err != nil || st != 503 {
		t.Fatalf("attempt 1: %d, %v; want 503", st, err)
	}
	st, got, err := post(t.Context(), srv, "n-1", body)
	if err != nil || st != 200 {
		t.Fatalf("attempt 2: %d, %v", st, err)
	}
	if err := ack.New("n-1", body).Verify(got); !errors.Is(err, courier.CodeAckInvalid) {
		t.Fatalf("attempt 2's Ack verifies (%v): it was not altered", err)
	}
	if _, _, err := post(t.Context(), srv, "n-1", body); err == nil {
		t.Fatal("attempt 3 got an answer; the connection was to be dropped")
	}
	st, got, err = post(t.Context(), srv, "n-1", body)
	if err != nil || st != 200 || ack.New("n-1", body).Verify(got) != nil {
		t.Fatalf("attempt 4: %d %s, %v; want the true Ack", st, got, err)
	}
	if calls.Load() != 3 { // the 503 never reached the handler
		t.Fatalf("the handler ran %d times, want 3", calls.Load())
	}
	s := srv.Stats()
	if s.Requests != 4 || s.Faulted != 1 || s.WrongAcks != 1 || s.Dropped != 1 || s.ByID["n-1"] != 4 ||
		s.ByStatus[503] != 1 || s.ByStatus[200] != 2 || s.ByStatus[0] != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestSequenceWithoutIDHeader: where the scheme sends no webhook-id (RFC
// 9421, AdCP HMAC, Bearer), each notification's attempts are still counted
// on their own: by the body's idempotency_key, its notification_id, or its
// digest. The handler behind gets the body whole.
func TestSequenceWithoutIDHeader(t *testing.T) {
	t.Parallel()
	// Each notification's body, by the id the server counts it under.
	plain := []byte(`{"plain":true}`)
	sum := sha256.Sum256(plain)
	bodies := map[string][]byte{
		"n-1":                      []byte(`{"notification_id":"n-1"}`),
		"key-0123456789abcdef":     []byte(`{"idempotency_key":"key-0123456789abcdef","notification_id":"n-2"}`),
		hex.EncodeToString(sum[:]): plain,
	}
	for scheme, keysFor := range map[string]func(origin string) couriertest.Keys{
		"bearer":    func(string) couriertest.Keys { return couriertest.BearerKeys("s") },
		"rfc 9421":  func(origin string) couriertest.Keys { return couriertest.RFC9421Keys("s", origin) },
		"adcp hmac": func(string) couriertest.Keys { return couriertest.AdCPHMACKeys("s") },
	} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				body, _ := io.ReadAll(r.Body)
				w.Write(body)
			})
			srv := couriertest.NewServer(echo, couriertest.Sequence(couriertest.Fault{Status: 503}))
			defer srv.Close()
			keys := keysFor(srv.URL)
			for attempt, want := range []int{503, 200} { // every notification's first attempt, then every second
				for id, body := range bodies {
					req := couriertest.NewRequest(srv.URL, id, body, keys.Signer)
					if req.Header.Get("webhook-id") != "" {
						t.Fatal("the scheme sends webhook-id")
					}
					resp, err := srv.Client().Do(req)
					if err != nil {
						t.Fatal(err)
					}
					got, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != want || want == 200 && !bytes.Equal(got, body) {
						t.Fatalf("%s attempt %d: %d %s; want %d", id, attempt+1, resp.StatusCode, got, want)
					}
				}
			}
			s := srv.Stats()
			for id := range bodies {
				if s.ByID[id] != 2 {
					t.Errorf("ByID[%s] = %d, want 2", id, s.ByID[id])
				}
			}
			if calls.Load() != int64(len(bodies)) {
				t.Errorf("the handler ran %d times, want %d", calls.Load(), len(bodies))
			}
		})
	}
}

// TestGuardAdmitsExactlyTheServer: the guard opened for a test server lets
// a worker reach it and nothing else on loopback.
func TestGuardAdmitsExactlyTheServer(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := couriertest.NewServer(ackHandler(&calls), nil)
	defer srv.Close()
	g := srv.Guard()
	u, _ := url.Parse(srv.URL)
	if !g.AllowHTTP || len(g.AllowPorts) != 1 || len(g.AllowPrefixes) != 1 || g.AllowPrefixes[0] != netip.MustParsePrefix(u.Hostname()+"/32") {
		t.Fatalf("guard %+v", g)
	}
	ok, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, nil)
	resp, err := g.Transport().RoundTrip(ok)
	if err != nil {
		t.Fatalf("the guard refused its own server: %v", err)
	}
	resp.Body.Close()
	other, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.2:"+u.Port(), nil)
	if _, err := g.Transport().RoundTrip(other); !errors.Is(err, courier.CodeDestinationForbidden) {
		t.Fatalf("another loopback address: %v, want CodeDestinationForbidden", err)
	}
}

// TestDelayEndsWhenClientHangsUp holds the answer for an hour; the client
// gives up once the hold began (after the handler ran), and the hold ends
// then, not at Close. Stats count the answer the client never saw under
// 0, not as the handler's 200 (they counted it so, before the hold).
func TestDelayEndsWhenClientHangsUp(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := couriertest.NewUnstartedServer(ackHandler(&calls), couriertest.Sequence(couriertest.Fault{Delay: time.Hour}))
	defer srv.Close()
	holding, released := make(chan struct{}), make(chan struct{})
	couriertest.SetOnHold(srv, func(ended bool) {
		if ended {
			close(released)
		} else {
			close(holding)
		}
	})
	srv.Start()

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, _, err := post(ctx, srv, "n-1", []byte("{}"))
		errc <- err
	}()
	<-holding
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client error = %v, want context.Canceled", err)
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second): // a guard against hanging, not a synchronization
		t.Fatal("the hold did not end when the client hung up")
	}
	if st, _, err := post(t.Context(), srv, "n-1", []byte("{}")); err != nil || st != 200 {
		t.Fatalf("retry: %d, %v", st, err)
	}
	srv.Close() // waits for the first request to finish
	if s := srv.Stats(); s.Requests != 2 || s.Delayed != 1 || calls.Load() != 2 || s.ByStatus[0] != 1 || s.ByStatus[200] != 1 {
		t.Fatalf("stats %+v, %d calls; want the held answer under 0, the retry's under 200", s, calls.Load())
	}
}

// TestCloseEndsDelay: Close does not wait out a pending Delay.
func TestCloseEndsDelay(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv := couriertest.NewUnstartedServer(ackHandler(&calls), couriertest.Sequence(couriertest.Fault{Delay: time.Hour}))
	holding := make(chan struct{})
	couriertest.SetOnHold(srv, func(ended bool) {
		if !ended {
			close(holding)
		}
	})
	srv.Start()
	errc := make(chan error, 1)
	go func() {
		_, _, err := post(t.Context(), srv, "n-1", []byte("{}"))
		errc <- err
	}()
	<-holding
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second): // a guard against hanging, not a synchronization
		t.Fatal("Close waited for the hour-long Delay")
	}
	<-errc // the answer or a closed connection; either way the client is done
}

// TestNewServerRefusesANilHandler: a Server over no receiver (nil, or the
// nil *Receiver of a NewReceiver whose error went unchecked) is refused
// where it is made, saying so, rather than panicking in every request it
// serves.
func TestNewServerRefusesANilHandler(t *testing.T) {
	for name, h := range map[string]http.Handler{"nil": nil, "typed nil": (*http.ServeMux)(nil)} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "couriertest: NewServer: the handler is nil") {
					t.Fatalf("NewUnstartedServer(%s) panicked with %q, want one naming the nil handler", name, msg)
				}
			}()
			srv := couriertest.NewUnstartedServer(h, nil)
			srv.Close()
		})
	}
}
