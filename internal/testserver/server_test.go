package testserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.uber.org/goleak"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/testserver"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// bundle is what a test needs around a Server.
type bundle struct {
	srv     *testserver.Server
	store   *store.Store
	signer  signature.Signer
	profile ack.Profile
}

// setup starts a Server over a fresh SQLite file. Its Close runs before the
// store's, at cleanup. Set cfg.Store and cfg.Verifier to nil to get the
// bundle's.
func setup(t *testing.T, cfg testserver.Config) *bundle {
	t.Helper()
	b := unstarted(t, cfg)
	b.srv.Start()
	return b
}

// unstarted is setup without Start.
func unstarted(t *testing.T, cfg testserver.Config) *bundle {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "receiver.db"), store.Config{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	key, err := signature.ParseStandardWebhooksKey("test", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	keys := []signature.StandardWebhooksKey{key}
	signer, err := signature.NewStandardWebhooksSigner(keys...)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "sender", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Verifier = st, verifier
	srv, err := testserver.NewUnstarted(cfg)
	if err != nil {
		t.Fatalf("NewUnstarted: %v", err)
	}
	t.Cleanup(srv.Close)
	profile, ok := ack.Builtin(ack.ProfileTerminal)
	if !ok {
		t.Fatal("no terminal profile")
	}
	return &bundle{srv: srv, store: st, signer: signer, profile: profile}
}

// notification returns the seq-th test notification and its payload.
func notification(t *testing.T, seq int) (ack.Terminal, []byte) {
	t.Helper()
	lifecycle := ack.Digest(fmt.Appendf(nil, "lifecycle-%d", seq))
	n, err := ack.NewTerminal(ack.Terminal{
		EventID:                fmt.Sprintf("event-%d", seq),
		SiteID:                 "site-1",
		PlanID:                 "plan-1",
		WebsiteVersion:         "v1",
		SourceSequence:         json.Number(strconv.Itoa(seq + 1)),
		JobCount:               "1",
		ChangeSHA256:           ack.Digest(fmt.Appendf(nil, "change-%d", seq)),
		LifecycleBindingSHA256: ack.Digest(fmt.Appendf(nil, "binding-%d", seq)),
		TerminalStatus:         "published",
		LifecycleSHA256:        &lifecycle,
	})
	if err != nil {
		t.Fatalf("NewTerminal: %v", err)
	}
	payload, err := n.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return n, payload
}

// answer is what one attempt got back.
type answer struct {
	status     int
	retryAfter string
	body       []byte
}

// send makes one signed attempt to deliver payload under id.
func (b *bundle) send(ctx context.Context, id string, payload []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/hooks", bytes.NewReader(payload))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := b.signer.Sign(req, signature.Message{ID: id, Body: payload, Time: time.Now()}); err != nil {
		return answer{}, err
	}
	res, err := b.srv.Client().Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), body: body}, nil
}

// verifyAck checks body against the Ack the terminal profile expects.
func (b *bundle) verifyAck(id string, payload, body []byte) error {
	return b.profile.Verify(ack.Sent{ID: id, Payload: payload, Attempt: 1}, body)
}

// effects returns the committed effect rows of id.
func (b *bundle) effects(t *testing.T, id string) int {
	t.Helper()
	e, err := b.srv.Effects(t.Context())
	if err != nil {
		t.Fatalf("Effects: %v", err)
	}
	return e[id]
}

// firstOnly returns a Script that applies f to every notification's first
// attempt only.
func firstOnly(f couriertest.Fault) couriertest.Script {
	return func(_ string, attempt int) couriertest.Fault {
		if attempt == 1 {
			return f
		}
		return couriertest.Fault{}
	}
}

func TestNewUnstartedValidatesConfig(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "receiver.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, _ := signature.ParseStandardWebhooksKey("", signature.NewStandardWebhooksSecret())
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "s", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]testserver.Config{
		"no store":    {Verifier: verifier},
		"no verifier": {Store: st},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := testserver.NewUnstarted(cfg); !errors.Is(err, courier.CodeConfigInvalid) {
				t.Fatalf("err = %v, want CodeConfigInvalid", err)
			}
		})
	}
}

func TestNoFault(t *testing.T) {
	t.Parallel()
	b := setup(t, testserver.Config{})
	n, payload := notification(t, 1)

	for range 2 {
		got, err := b.send(t.Context(), n.NotificationID, payload)
		if err != nil {
			t.Fatal(err)
		}
		if got.status != http.StatusOK {
			t.Fatalf("status = %d, want 200: %s", got.status, got.body)
		}
		if err := b.verifyAck(n.NotificationID, payload, got.body); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	if e := b.effects(t, n.NotificationID); e != 1 {
		t.Fatalf("effects = %d, want 1", e)
	}
	st := b.srv.Stats()
	if st.Requests != 2 || st.Processed != 1 || st.Replayed != 1 || st.ByID[n.NotificationID] != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestFaults sends a notification whose first attempt meets a fault, then
// retries it without one: the notification is processed exactly once, and a
// fault after the commit makes the retry a replay of the same Ack.
func TestFaults(t *testing.T) {
	t.Parallel()
	const delay = 200 * time.Millisecond
	tests := []struct {
		name  string
		fault couriertest.Fault
		// first checks the faulted attempt.
		first func(t *testing.T, b *bundle, id string, payload []byte, got answer, err error)
		// committed says whether the faulted attempt ran the receiver.
		committed bool
		wantStats testserver.Stats // Requests, ByID, Processed and Replayed are checked apart
	}{
		{
			name:  "503",
			fault: couriertest.Fault{Status: http.StatusServiceUnavailable, RetryAfter: "1"},
			first: func(t *testing.T, _ *bundle, _ string, _ []byte, got answer, err error) {
				if err != nil || got.status != http.StatusServiceUnavailable || got.retryAfter != "1" {
					t.Fatalf("got %d Retry-After %q, %v; want 503 Retry-After 1", got.status, got.retryAfter, err)
				}
			},
			wantStats: testserver.Stats{Stats: couriertest.Stats{Faulted: 1, ByStatus: map[int]int{503: 1, 200: 1}}},
		},
		{
			name:  "429",
			fault: couriertest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "1"},
			first: func(t *testing.T, _ *bundle, _ string, _ []byte, got answer, err error) {
				if err != nil || got.status != http.StatusTooManyRequests || got.retryAfter != "1" {
					t.Fatalf("got %d Retry-After %q, %v; want 429 Retry-After 1", got.status, got.retryAfter, err)
				}
			},
			wantStats: testserver.Stats{Stats: couriertest.Stats{Faulted: 1, ByStatus: map[int]int{429: 1, 200: 1}}},
		},
		{
			name:  "drop after commit",
			fault: couriertest.Fault{DropAfterCommit: true},
			first: func(t *testing.T, _ *bundle, _ string, _ []byte, got answer, err error) {
				if err == nil {
					t.Fatalf("got %d, want a connection error", got.status)
				}
			},
			committed: true,
			wantStats: testserver.Stats{Stats: couriertest.Stats{Dropped: 1, ByStatus: map[int]int{0: 1, 200: 1}}},
		},
		{
			name:  "delay",
			fault: couriertest.Fault{Delay: delay},
			first: func(t *testing.T, b *bundle, id string, payload []byte, got answer, err error) {
				if err != nil || got.status != http.StatusOK {
					t.Fatalf("got %d, %v; want 200", got.status, err)
				}
				if err := b.verifyAck(id, payload, got.body); err != nil {
					t.Fatalf("delayed ack: %v", err)
				}
			},
			committed: true,
			wantStats: testserver.Stats{Stats: couriertest.Stats{Delayed: 1, ByStatus: map[int]int{200: 2}}},
		},
		{
			name:  "wrong ack",
			fault: couriertest.Fault{WrongAck: true},
			first: func(t *testing.T, b *bundle, id string, payload []byte, got answer, err error) {
				if err != nil || got.status != http.StatusOK {
					t.Fatalf("got %d, %v; want 200", got.status, err)
				}
				var members map[string]string // an Ack's members are all strings
				err = json.Unmarshal(got.body, &members)
				for _, name := range []string{"schema", "notification_id", "status", "notification_sha256"} {
					if err != nil || members[name] == "" {
						t.Fatalf("altered ack is not an Ack document (%s): %s (%v)", name, got.body, err)
					}
				}
				if err := b.verifyAck(id, payload, got.body); !errors.Is(err, courier.CodeAckInvalid) {
					t.Fatalf("verify altered ack: %v, want CodeAckInvalid", err)
				}
			},
			committed: true,
			wantStats: testserver.Stats{Stats: couriertest.Stats{WrongAcks: 1, ByStatus: map[int]int{200: 2}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, testserver.Config{Script: firstOnly(tt.fault)})
			n, payload := notification(t, 1)
			id := n.NotificationID

			start := time.Now()
			got, err := b.send(t.Context(), id, payload)
			tt.first(t, b, id, payload, got, err)
			if tt.fault.Delay > 0 {
				if elapsed := time.Since(start); elapsed < tt.fault.Delay {
					t.Errorf("delayed answer came after %v, before the %v delay", elapsed, tt.fault.Delay)
				}
			}
			wantEffects := 0
			if tt.committed {
				wantEffects = 1
			}
			if e := b.effects(t, id); e != wantEffects {
				t.Fatalf("effects after the faulted attempt = %d, want %d", e, wantEffects)
			}

			retry, err := b.send(t.Context(), id, payload)
			if err != nil || retry.status != http.StatusOK {
				t.Fatalf("retry: %d %s, %v", retry.status, retry.body, err)
			}
			if err := b.verifyAck(id, payload, retry.body); err != nil {
				t.Fatalf("retry ack: %v", err)
			}
			if tt.fault.Delay > 0 && !bytes.Equal(retry.body, got.body) {
				t.Errorf("replayed ack differs from the first:\n%s\n%s", retry.body, got.body)
			}
			if e := b.effects(t, id); e != 1 {
				t.Fatalf("effects after the retry = %d, want 1", e)
			}

			want := tt.wantStats
			want.Requests = 2
			want.ByID = map[string]int{id: 2}
			want.Processed = 1
			if tt.committed {
				want.Replayed = 1
			}
			checkStats(t, b.srv.Stats(), want)
		})
	}
}

func checkStats(t *testing.T, got, want testserver.Stats) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stats = %+v, want %+v", got, want)
	}
}

// TestProcess runs in the receiver's transaction after the effect row is
// written, and its error rolls both back.
func TestProcess(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	fail := true
	seen := -1
	b := setup(t, testserver.Config{Process: func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
		var rows int
		if err := tx.GetContext(ctx, &rows, "SELECT COUNT(*) FROM couriertest_effects WHERE effect_key = ?", n.NotificationID); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		seen = rows
		if fail {
			fail = false
			return errors.New("application failed")
		}
		return nil
	}})
	n, payload := notification(t, 1)
	id := n.NotificationID

	got, err := b.send(t.Context(), id, payload)
	if err != nil || got.status != http.StatusInternalServerError {
		t.Fatalf("got %d, %v; want 500", got.status, err)
	}
	if e := b.effects(t, id); e != 0 {
		t.Fatalf("effects after a failed Process = %d, want 0", e)
	}
	got, err = b.send(t.Context(), id, payload)
	if err != nil || got.status != http.StatusOK {
		t.Fatalf("retry: %d, %v", got.status, err)
	}
	if e := b.effects(t, id); e != 1 {
		t.Fatalf("effects = %d, want 1", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != 1 {
		t.Fatalf("Process saw %d effect rows in its transaction, want 1", seen)
	}
	checkStats(t, b.srv.Stats(), testserver.Stats{Stats: couriertest.Stats{Requests: 2, ByID: map[string]int{id: 2}, ByStatus: map[int]int{500: 1, 200: 1}}, Rejected: 1, Processed: 1})
}

// TestSeededChaos delivers notifications concurrently through a seeded
// mix of every fault, retrying like a sender would, and checks that each
// was processed exactly once.
func TestSeededChaos(t *testing.T) {
	t.Parallel()
	script := couriertest.SeededScript(7, couriertest.ScriptSpec{
		FirstAttempt503: true,
		RateLimited:     0.2,
		DropAfterCommit: 0.2,
		Delay:           0.2,
		DelayBy:         10 * time.Millisecond,
		WrongAck:        0.1,
	})
	b := setup(t, testserver.Config{Script: script})
	const notifications = 16
	var wg sync.WaitGroup
	ids := make([]string, notifications)
	for i := range notifications {
		n, payload := notification(t, i)
		ids[i] = n.NotificationID
		wg.Go(func() {
			for attempt := 1; attempt <= couriertest.MaxFaultedAttempt+1; attempt++ {
				got, err := b.send(t.Context(), n.NotificationID, payload)
				if err == nil && got.status == http.StatusOK && b.verifyAck(n.NotificationID, payload, got.body) == nil {
					return
				}
			}
			t.Errorf("notification %d not delivered after %d attempts", i, couriertest.MaxFaultedAttempt+1)
		})
	}
	wg.Wait()

	effects, err := b.srv.Effects(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(effects) != notifications {
		t.Errorf("%d notifications have effects, want %d", len(effects), notifications)
	}
	for _, id := range ids {
		if effects[id] != 1 {
			t.Errorf("effects[%s] = %d, want 1", id, effects[id])
		}
	}
	st := b.srv.Stats()
	if st.Processed != notifications {
		t.Errorf("Processed = %d, want %d", st.Processed, notifications)
	}
	if st.Faulted < notifications || st.Dropped == 0 || st.Delayed == 0 || st.WrongAcks == 0 {
		t.Errorf("the script injected too little: %+v", st)
	}
}

// TestUnstarted: fields set between NewUnstarted and Start take effect, and
// an unstarted server closes cleanly.
func TestUnstarted(t *testing.T) {
	t.Parallel()
	t.Run("listener", func(t *testing.T) {
		t.Parallel()
		b := unstarted(t, testserver.Config{})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		b.srv.Listener = ln
		b.srv.HTTPServer.ReadHeaderTimeout = 5 * time.Second
		b.srv.Start()
		if want := "http://" + ln.Addr().String(); b.srv.URL != want {
			t.Fatalf("URL = %s, want %s", b.srv.URL, want)
		}
		n, payload := notification(t, 1)
		if got, err := b.send(t.Context(), n.NotificationID, payload); err != nil || got.status != http.StatusOK {
			t.Fatalf("got %d, %v", got.status, err)
		}
	})
	t.Run("close", func(t *testing.T) {
		t.Parallel()
		b := unstarted(t, testserver.Config{})
		b.srv.Close()
		b.srv.Close() // and again, at cleanup
	})
}
