package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/testmain"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// courierRun runs the tool and returns its exit status and output.
func courierRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustRun runs the tool and fails the test unless it exits with want.
func mustRun(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, out, errOut := courierRun(t, args...)
	if code != want {
		t.Fatalf("courier %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out
}

// migrated returns a migrated SQLite database file and its Store.
func migrated(t *testing.T) (string, *store.Store) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "app.db")
	mustRun(t, exitOK, "migrate", "-db", db)
	s, err := sqlite.Open(t.Context(), db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return db, s
}

// engines are the engines the tool's tests run on: each gives a migrated
// database's -db, and opens Stores on it with a Config of the test's.
var engines = []struct {
	name string
	db   func(t *testing.T) (string, func(store.Config) *store.Store)
}{
	{"sqlite", func(t *testing.T) (string, func(store.Config) *store.Store) {
		db := filepath.Join(t.TempDir(), "app.db")
		mustRun(t, exitOK, "migrate", "-db", db)
		return db, func(cfg store.Config) *store.Store {
			s, err := sqlite.Open(t.Context(), db, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}},
	{"postgres", func(t *testing.T) (string, func(store.Config) *store.Store) {
		db := couriertest.PostgresURL(t)
		mustRun(t, exitOK, "migrate", "-db", db)
		conn, err := sqlx.Open(postgres.DriverName, db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return db, func(cfg store.Config) *store.Store {
			s, err := store.Open(t.Context(), conn, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	}},
}

// enqueue enqueues a delivery of id to url.
func enqueue(t *testing.T, s *store.Store, id, url string) {
	t.Helper()
	tx, err := s.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: id, Endpoint: url, Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// failAll claims every due delivery and fails it with 503.
func failAll(t *testing.T, s *store.Store) {
	t.Helper()
	p := protocol.For(s)
	claimed, err := p.Claim(t.Context(), protocol.ClaimParams{Owner: "test", Limit: 100, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if _, err := p.Settle(t.Context(), protocol.Outcome{Lease: c.Lease, Result: protocol.Failed, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	if code, _, errOut := courierRun(t); code != exitUsage || !strings.Contains(errOut, "commands:") {
		t.Fatalf("no command: %d %q", code, errOut)
	}
	if code, _, _ := courierRun(t, "nope"); code != exitUsage {
		t.Fatalf("unknown command: %d", code)
	}
	if code, _, _ := courierRun(t, "health", "-no-such-flag"); code != exitUsage {
		t.Fatalf("unknown flag: %d", code)
	}
	if code, _, errOut := courierRun(t, "health", "-db", filepath.Join(t.TempDir(), "missing.db")); code != exitFailed || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing database: %d %q", code, errOut)
	}
}

// TestHelpAsksForTheUsage: every spelling of help the flag package takes
// after a command (-h, -help, with one dash or two), and help, asks for the
// list of commands in place of one, on stderr, exiting 0.
func TestHelpAsksForTheUsage(t *testing.T) {
	t.Parallel()
	for _, help := range []string{"-h", "-help", "--h", "--help", "help"} {
		code, out, errOut := courierRun(t, help)
		if code != exitOK || out != "" || !strings.Contains(errOut, "commands:") || strings.Contains(errOut, "unknown command") {
			t.Errorf("courier %s: exit %d, stdout %q, stderr %q; want 0 and the usage alone on stderr", help, code, out, errOut)
		}
	}
}

// TestActionsHelp: -h in place of the action of a command that has
// actions prints the command's usage and every action's synopsis and
// flags, and exits 0, as -h after a command without actions does.
func TestActionsHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		command string
		want    []string // the usage line, each action's heading, a flag of some
	}{
		{"deliveries", []string{"usage: courier deliveries list|show|redrive|cancel",
			"usage: courier deliveries list ", "-status", "usage: courier deliveries show ",
			"usage: courier deliveries redrive ", "-endpoint-ref", "usage: courier deliveries cancel "}},
		{"endpoints", []string{"usage: courier endpoints list|blocked|enable|disable|limit",
			"usage: courier endpoints list ", "usage: courier endpoints blocked ", "usage: courier endpoints enable ",
			"usage: courier endpoints disable ", "usage: courier endpoints limit ", "-max-in-flight", "-clear"}},
		{"contracts", []string{"usage: courier contracts list -db … | courier contracts pin", "usage: courier contracts list ", "usage: courier contracts pin ",
			"usage: courier contracts unpin ", "usage: courier contracts fail-mismatched ", "-db"}},
		{"secret", []string{"usage: courier secret new", "usage: courier secret new ", "-type"}},
	} {
		for _, help := range []string{"-h", "--help"} {
			t.Run(tc.command+help, func(t *testing.T) {
				t.Parallel()
				code, out, errOut := courierRun(t, tc.command, help)
				if code != exitOK || out != "" {
					t.Fatalf("courier %s %s: exit %d, stdout %q, want 0 and the help on stderr\nstderr: %s", tc.command, help, code, out, errOut)
				}
				for _, want := range tc.want {
					if !strings.Contains(errOut, want) {
						t.Errorf("courier %s %s does not say %q:\n%s", tc.command, help, want, errOut)
					}
				}
			})
		}
	}
	if code, _, errOut := courierRun(t, "migrate", "-h"); code != exitOK || !strings.Contains(errOut, "usage: courier migrate ") {
		t.Fatalf("courier migrate -h: %d %q", code, errOut)
	}
	if code, _, errOut := courierRun(t, "deliveries", "-nope"); code != exitUsage || !strings.Contains(errOut, `unknown action "-nope"`) {
		t.Fatalf("courier deliveries -nope: %d %q", code, errOut)
	}
}

// TestMigrateAndHealth: migrate makes a database courier can open, health
// reports ok (exit 0), then blocked with its code (exit 3) once a
// delivery failed.
func TestMigrateAndHealth(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	mustRun(t, exitOK, "migrate", "-db", db) // again: a no-op
	if out := mustRun(t, exitOK, "health", "-db", db); !strings.Contains(out, "status: ok") {
		t.Fatalf("health: %s", out)
	}
	enqueue(t, s, "n-1", "https://r.example/hooks")
	failAll(t, s)
	if out := mustRun(t, exitBlocked, "health", "-db", db); !strings.Contains(out, "status: blocked (deliveries_failed)") || !strings.Contains(out, "failed: 1") {
		t.Fatalf("health: %s", out)
	}
}

// TestHealthBlocksOnDeliveriesPastTheirDeadline: a delivery enqueued two
// hours ago with a deadline an hour ago, that no worker claimed, is
// overdue: health is blocked (exit 3) with deliveries_overdue and counts
// it.
func TestHealthBlocksOnDeliveriesPastTheirDeadline(t *testing.T) {
	t.Parallel()
	db, _ := migrated(t)
	then := time.Now().Add(-2 * time.Hour)
	s, err := sqlite.Open(t.Context(), db, store.Config{Now: func() time.Time { return then }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/hooks", Payload: []byte(`{}`), Deadline: then.Add(time.Hour)}
	if _, err := s.Outbox.Enqueue(t.Context(), tx, p); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, exitBlocked, "health", "-db", db); !strings.Contains(out, "status: blocked (deliveries_overdue)") || !strings.Contains(out, "overdue: 1") {
		t.Fatalf("health: %s", out)
	}
}

// TestDeliveries lists, shows, redrives and cancels, and never prints an
// endpoint's credentials.
func TestDeliveries(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	secretURL := "https://user:pass@r.example/hooks/PATHSECRET?token=SECRET"
	enqueue(t, s, "n-1", secretURL)
	failAll(t, s)
	enqueue(t, s, "n-2", secretURL)

	out := mustRun(t, exitOK, "deliveries", "list", "-db", db)
	if !strings.Contains(out, "n-1") || !strings.Contains(out, "n-2") || !strings.Contains(out, "receiver_unavailable") {
		t.Fatalf("list: %s", out)
	}
	out += mustRun(t, exitOK, "deliveries", "list", "-db", db, "-status", "failed", "-endpoint-ref", endpoint.Ref(secretURL))
	shown := mustRun(t, exitOK, "deliveries", "show", "-db", db, "1")
	if !strings.Contains(shown, `"endpoint_ref": "`+endpoint.Ref(secretURL)+`"`) {
		t.Fatalf("show does not name the endpoint by its ref:\n%s", shown)
	}
	out += shown
	for _, secret := range []string{"pass", "SECRET", "token"} {
		if strings.Contains(out, secret) {
			t.Fatalf("output shows %q:\n%s", secret, out)
		}
	}
	if out := mustRun(t, exitOK, "deliveries", "redrive", "-db", db, "1"); !strings.Contains(out, "redriven: 1") {
		t.Fatalf("redrive: %s", out)
	}
	// A count, as redrive's and an endpoint's cancel's: "cancelled: 2"
	// printed the id, and read as two deliveries cancelled.
	if out := mustRun(t, exitOK, "deliveries", "cancel", "-db", db, "2"); out != "cancelled: 1\n" {
		t.Fatalf("cancel of delivery 2 printed %q, want %q", out, "cancelled: 1\n")
	}
	if code, _, errOut := courierRun(t, "deliveries", "cancel", "-db", db, "2"); code != exitFailed || !strings.Contains(errOut, "delivery 2 is suppressed: only a pending, retry_wait, failed or quarantined delivery can be cancelled") {
		t.Fatalf("cancel twice: %d %s", code, errOut)
	}
	for id, want := range map[int64]courier.Status{1: courier.StatusPending, 2: courier.StatusSuppressed} {
		d, err := s.Outbox.Get(t.Context(), id)
		if err != nil || d.Status != want {
			t.Fatalf("delivery %d: %s, %v; want %s", id, d.Status, err, want)
		}
	}
	mustRun(t, exitUsage, "deliveries", "show", "-db", db)
	mustRun(t, exitUsage, "deliveries", "redrive", "-db", db)
}

// TestDeliveriesRedriveTakesAnUnreadableQuarantine: the tool, whose
// Store has no payload keys, shows which key a delivery quarantined
// payload_unreadable needs, and redrives a delivery quarantined
// payload_unreadable by a process that lacked its key, and fails saying
// why it leaves one quarantined integrity_mismatch (its row altered).
func TestDeliveriesRedriveTakesAnUnreadableQuarantine(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := t.Context()
	k1, err := store.NewPayloadKey("k1", bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := store.Open(ctx, s.DB(), store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sealed.Close() })
	enqueue(t, s, "n-1", "https://r.example/hooks")
	if _, err := s.DB().ExecContext(ctx, "UPDATE courier_outbox_payload SET payload = '{\"altered\":1}' WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	enqueue(t, sealed, "n-2", "https://r.example/hooks")
	failAll(t, s) // claims neither: 1 does not match its digest, 2 does not open without k1
	for id, code := range map[int64]courier.Code{1: courier.CodeIntegrity, 2: courier.CodePayloadUnreadable} {
		if d, err := s.Outbox.Get(ctx, id); err != nil || d.Status != courier.StatusQuarantined || d.LastErrorCode != code {
			t.Fatalf("delivery %d: %s/%s, %v; want quarantined/%s", id, d.Status, d.LastErrorCode, err, code)
		}
	}
	if code, out, errOut := courierRun(t, "deliveries", "redrive", "-db", db, "1"); code != exitFailed || out != "" ||
		!strings.Contains(errOut, "delivery 1 is quarantined integrity_mismatch, not failed or payload_unreadable: cancel it") {
		t.Fatalf("redrive of an altered delivery: %d %q %q", code, out, errOut)
	}
	// show names the key the delivery needs back, never its bytes.
	if out := mustRun(t, exitOK, "deliveries", "show", "-db", db, "2"); !strings.Contains(out, `"payload_key_id": "k1"`) {
		t.Fatalf("show of a delivery quarantined payload_unreadable does not name its key: %s", out)
	}
	if out := mustRun(t, exitOK, "deliveries", "redrive", "-db", db, "2"); out != "redriven: 1\n" {
		t.Fatalf("redrive of a delivery quarantined payload_unreadable: %q", out)
	}
	if d, err := s.Outbox.Get(ctx, 2); err != nil || d.Status != courier.StatusPending {
		t.Fatalf("delivery 2 after the redrive: %s, %v; want pending", d.Status, err)
	}
}

// TestDeliveriesSaysWhatIsNotThere: show, redrive or cancel of an id no
// delivery has is an error that says so (show said "not_found: not found"), redrive of a delivery that is not
// failed redrives nothing and fails saying why, and list refuses a status that
// does not exist, naming those that do.
func TestDeliveriesSaysWhatIsNotThere(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://r.example/hooks")
	for _, action := range []string{"show", "redrive", "cancel"} {
		code, out, errOut := courierRun(t, "deliveries", action, "-db", db, "99")
		if code != exitFailed || errOut != "courier deliveries: delivery 99 not found\n" || out != "" {
			t.Fatalf("%s of a missing delivery: %d %q %q", action, code, out, errOut)
		}
	}
	if code, out, errOut := courierRun(t, "deliveries", "redrive", "-db", db, "1"); code != exitFailed || out != "" || !strings.Contains(errOut, "delivery 1 is pending, not failed") {
		t.Fatalf("redrive of a pending delivery: %d %q %q", code, out, errOut)
	}
	code, out, errOut := courierRun(t, "deliveries", "list", "-db", db, "-status", "bogus")
	if code != exitUsage || out != "" || !strings.Contains(errOut, `"bogus" is not a status`) {
		t.Fatalf("list -status bogus: %d %q %q", code, out, errOut)
	}
	for _, st := range courier.Statuses() {
		if !strings.Contains(errOut, string(st)) {
			t.Fatalf("list -status bogus does not name %s: %q", st, errOut)
		}
	}
}

// TestEndpoints disables and enables an endpoint by URL and by ref.
func TestEndpoints(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	url := "https://r.example/hooks?token=SECRET"
	enqueue(t, s, "n-1", url)
	if out := mustRun(t, exitOK, "endpoints", "disable", "-db", db, url); !strings.Contains(out, "disabled: https://r.example/…") {
		t.Fatalf("disable: %s", out)
	}
	out := mustRun(t, exitOK, "endpoints", "list", "-db", db)
	if !strings.Contains(out, "disabled") || !strings.Contains(out, endpoint.Ref(url)) || strings.Contains(out, "SECRET") {
		t.Fatalf("list: %s", out)
	}
	mustRun(t, exitOK, "endpoints", "enable", "-db", db, endpoint.Ref(url))
	if h, err := s.Endpoints.Get(t.Context(), url); err != nil || h.State != store.EndpointClosed {
		t.Fatalf("after enable: %+v, %v", h, err)
	}
}

// TestEndpointsLimit sets an endpoint's limits by ref, shows them in the
// list, refuses limits no claim could honour, and removes them with
// -clear.
func TestEndpointsLimit(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	url := "https://r.example/hooks?token=SECRET"
	enqueue(t, s, "n-1", url)
	out := mustRun(t, exitOK, "endpoints", "limit", "-db", db, "-max-in-flight", "5", "-rate", "50", endpoint.Ref(url))
	if !strings.Contains(out, "max 5 in flight, 50/s burst 50") || strings.Contains(out, "SECRET") {
		t.Fatalf("limit: %s", out)
	}
	if h, err := s.Endpoints.Get(t.Context(), url); err != nil || h.Limits != (store.Limits{MaxInFlight: 5, Rate: 50, Burst: 50}) {
		t.Fatalf("after limit: %+v, %v", h.Limits, err)
	}
	if out := mustRun(t, exitOK, "endpoints", "list", "-db", db); !strings.Contains(out, "max 5 in flight") || !strings.Contains(out, "BLOCKED KEYS") {
		t.Fatalf("list: %s", out)
	}
	if code, _, errOut := courierRun(t, "endpoints", "limit", "-db", db, "-max-in-flight", "0", "-rate", "0", "-burst", "3", url); code != exitUsage || !strings.Contains(errOut, "-burst needs a -rate") {
		t.Fatalf("a burst without a rate: %d %s", code, errOut)
	}
	if out := mustRun(t, exitOK, "endpoints", "limit", "-db", db, "-clear", url); !strings.Contains(out, "limits of https://r.example/… (ref "+endpoint.Ref(url)+"): -") {
		t.Fatalf("limit -clear: %s", out)
	}
	if h, _ := s.Endpoints.Get(t.Context(), url); h.Limits != (store.Limits{}) {
		t.Fatalf("after removing: %+v", h.Limits)
	}
}

// TestEndpointsLimitWithoutFlagsKeepsTheLimits: limit with no limit flag,
// with -clear and a limit, or with one of -max-in-flight and -rate left
// out, is a usage error that leaves the endpoint's limits as they were:
// limit replaces them, so a command line that lost its flags, or meant to
// change one limit, took an endpoint's other limits away.
func TestEndpointsLimitWithoutFlagsKeepsTheLimits(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	url := "https://r.example/hooks"
	enqueue(t, s, "n-1", url)
	limits := store.Limits{MaxInFlight: 5, Rate: 50, Burst: 50}
	if err := s.Endpoints.SetLimits(t.Context(), url, limits); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags []string
		names string
	}{
		{nil, "-clear"},
		{[]string{"-clear", "-rate", "10"}, "-clear"},
		{[]string{"-clear", "-max-in-flight", "0"}, "-clear"},
		{[]string{"-rate", "10"}, "-max-in-flight"}, // meant to change the rate alone: it removed the in-flight limit
		{[]string{"-max-in-flight", "2", "-burst", "5"}, "-rate"},
	} {
		args := append(append([]string{"endpoints", "limit", "-db", db}, tc.flags...), url)
		code, out, errOut := courierRun(t, args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.names) {
			t.Errorf("courier %s: exit %d, stdout %q, stderr %q; want %d naming %s", strings.Join(args, " "), code, out, errOut, exitUsage, tc.names)
		}
		if h, err := s.Endpoints.Get(t.Context(), url); err != nil || h.Limits != limits {
			t.Fatalf("after courier %s: limits %+v, %v; want %+v", strings.Join(args, " "), h.Limits, err, limits)
		}
	}
}

// TestContracts pins a digest and fails the commands of another.
func TestContracts(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	url := "https://source.example/commands"
	digest := strings.Repeat("a", 64)
	if out := mustRun(t, exitOK, "contracts", "pin", "-db", db, url, digest); !strings.Contains(out, "pinned") {
		t.Fatalf("pin: %s", out)
	}
	c, err := s.Contracts.Get(t.Context(), url)
	if err != nil || c.CapabilitiesSHA256 != digest {
		t.Fatalf("pin stored %+v, %v", c, err)
	}
	if out := mustRun(t, exitOK, "contracts", "fail-mismatched", "-db", db, url); !strings.Contains(out, "failed: 0") {
		t.Fatalf("fail-mismatched: %s", out)
	}
	mustRun(t, exitUsage, "contracts", "pin", "-db", db, url, "not-a-digest")
}

func TestSecretNew(t *testing.T) {
	t.Parallel()
	out := strings.TrimSpace(mustRun(t, exitOK, "secret", "new"))
	if _, err := signature.ParseStandardWebhooksKey("", out); err != nil || !strings.HasPrefix(out, "whsec_") {
		t.Fatalf("secret %.9s…: %v", out, err)
	}
	out = mustRun(t, exitOK, "secret", "new", "-type", "whsk")
	var private, public string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "private":
			private = strings.TrimSpace(v)
		case "public":
			public = strings.TrimSpace(v)
		}
	}
	priv, err := signature.ParseStandardWebhooksKey("k", private)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := signature.ParseStandardWebhooksKey("k", public)
	if err != nil {
		t.Fatal(err)
	}
	if priv.Public().ID() != pub.ID() {
		t.Fatal("the public key is not the private key's")
	}
	mustRun(t, exitUsage, "secret", "new", "-type", "rsa")
}

// note is the payload send's default body decodes into.
type note struct {
	ID   string `json:"id" validate:"required,courier_token"`
	Test bool   `json:"test"`
}

func (n note) DedupeKey() string { return n.ID }

// TestSendAndVerify: send delivers a signed test notification to a
// courier receiver and checks its Ack; verify accepts a captured request
// and refuses it once tampered with; neither takes the secret from the
// command line.
func TestSendAndVerify(t *testing.T) {
	secret := signature.NewStandardWebhooksSecret()
	t.Setenv("COURIER_SECRET", secret)
	key, _ := signature.ParseStandardWebhooksKey("k", secret)
	verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "cli", Keys: []signature.StandardWebhooksKey{key}})
	_, inbox := migrated(t)
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: verifier},
		func(context.Context, *sqlx.Tx, note) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var captured []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		captured, _ = httputil.DumpRequest(r, true)
		rcv.ServeHTTP(w, r)
	}))
	defer srv.Close()

	// The guard is closed unless -allow-private, and its refusal names the flag.
	if code, _, errOut := courierRun(t, "send", "-url", srv.URL+"/notes", "-id", "n-1"); code != exitFailed || !strings.Contains(errOut, "destination_forbidden") || !strings.Contains(errOut, "-allow-private") {
		t.Fatalf("send through the closed guard: %d %s", code, errOut)
	}
	out := mustRun(t, exitOK, "send", "-url", srv.URL+"/notes", "-id", "n-1", "-allow-private")
	if !strings.Contains(out, "status: 200") || !strings.Contains(out, "ack: valid") {
		t.Fatalf("send: %s", out)
	}
	file := filepath.Join(t.TempDir(), "request.http")
	if err := os.WriteFile(file, captured, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, exitOK, "verify", "-request", file); !strings.Contains(out, "verified: sender sender") || !strings.Contains(out, "message n-1") {
		t.Fatalf("verify: %s", out)
	}
	tampered := bytes.Replace(captured, []byte(`"test":true`), []byte(`"test":false`), 1)
	if err := os.WriteFile(file, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, exitBlocked, "verify", "-request", file); !strings.Contains(out, "refused: signature_mismatch") {
		t.Fatalf("verify tampered: %s", out)
	}
	if code, _, _ := courierRun(t, "send", "-url", srv.URL, "-secret", secret); code != exitUsage {
		t.Fatal("send took -secret on the command line")
	}
}

// TestSendHidesURLCredentials: a send that fails names the URL without
// its query or userinfo, which may carry a credential.
func TestSendHidesURLCredentials(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(signature.NewStandardWebhooksSecret()), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // no answer
		}
	}))
	t.Cleanup(srv.Close) // after the parallel subtests

	target := strings.Replace(srv.URL, "http://", "http://user:PASSWORD@", 1) + "/notes/PATHSECRET?token=SECRET"
	for name, args := range map[string][]string{
		"refused by the guard": {"send", "-url", target, "-secret-file", secretFile},
		"no answer":            {"send", "-url", target, "-secret-file", secretFile, "-allow-private"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := courierRun(t, args...)
			for _, secret := range []string{"SECRET", "token", "PASSWORD", "user"} {
				if strings.Contains(out+errOut, secret) {
					t.Fatalf("output shows %q", secret) // not the output: it would show it again
				}
			}
			if code != exitFailed || !strings.Contains(errOut, "POST "+srv.URL+"/…: ") {
				t.Fatalf("exit %d, stderr %q; want 1 naming the redacted URL", code, errOut)
			}
		})
	}
}

// TestPostgres: the same tool on a PostgreSQL URL.
func TestPostgres(t *testing.T) {
	t.Parallel()
	url := couriertest.PostgresURL(t)
	mustRun(t, exitOK, "migrate", "-db", url)
	if out := mustRun(t, exitOK, "health", "-db", url); !strings.Contains(out, "status: ok") || !strings.Contains(out, "endpoints open: 0\n") {
		t.Fatalf("health: %s", out)
	}
	mustRun(t, exitOK, "deliveries", "list", "-db", url)
}

// keywordValueForm returns the PostgreSQL URL raw as a libpq keyword/value
// connection string (user='…' host='…' …).
func keywordValueForm(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	quote := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	var kv []string
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, k+"='"+quote.Replace(v)+"'")
		}
	}
	password, _ := u.User.Password()
	add("user", u.User.Username())
	add("password", password)
	add("host", u.Hostname())
	add("port", u.Port())
	add("dbname", strings.TrimPrefix(u.Path, "/"))
	q := u.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		add(k, q.Get(k))
	}
	return strings.Join(kv, " ")
}

// TestPostgresConnectionStrings: a keyword/value connection string and a
// URL whose scheme is in capitals name a PostgreSQL database, as pgx takes
// them; neither becomes a SQLite file of that name.
func TestPostgresConnectionStrings(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd) // where a SQLite file named after -db would appear
	for name, form := range map[string]func(t *testing.T, pgURL string) string{
		"keyword/value": keywordValueForm,
		"capital scheme": func(t *testing.T, raw string) string {
			scheme, rest, _ := strings.Cut(raw, "://")
			return strings.ToUpper(scheme) + "://" + rest
		},
	} {
		t.Run(name, func(t *testing.T) {
			pgURL := couriertest.PostgresURL(t)
			db := form(t, pgURL)
			if out := mustRun(t, exitOK, "migrate", "-db", db); !strings.HasPrefix(out, "migrated: schema version ") {
				t.Fatalf("migrate: %q", out)
			}
			if out := mustRun(t, exitOK, "health", "-db", db); !strings.Contains(out, "status: ok") {
				t.Fatalf("health: %s", out)
			}
			d, err := sqlx.Open(postgres.DriverName, pgURL)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			s, err := store.Open(t.Context(), d, store.Config{}) // only over courier's tables
			if err != nil {
				t.Fatalf("migrate did not migrate the PostgreSQL database: %v", err)
			}
			s.Close()
		})
	}
	if entries, _ := os.ReadDir(wd); len(entries) != 0 {
		t.Fatalf("-db made %d files in the working directory, the first %q", len(entries), entries[0].Name())
	}
}

// TestDBIsNeverQuoted: whatever -db holds, no output quotes it (it may
// hold a password), and a connection string is not a SQLite file name.
// One that does not parse is a usage error (2); one that parses and
// reaches no database, a failure (1).
func TestDBIsNeverQuoted(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	for _, tc := range []struct {
		db   string
		exit int
	}{
		{"host=/nonexistent user=app password=s3cret dbname=app", exitFailed}, // no server there
		{"host=/nonexistent password='s3cret", exitUsage},                     // an unterminated quote
		{"POSTGRES://app:s3cret@127.0.0.1:notaport/app", exitUsage},
		{"postgresql://app:s3cret@[::1/app", exitUsage},
		{"mysql://app:s3cret@db.example/app", exitUsage}, // another engine's: no SQLite file path
	} {
		for _, cmd := range [][]string{{"migrate"}, {"health"}, {"deliveries", "list"}, {"endpoints", "list"}} {
			code, out, errOut := courierRun(t, append(cmd, "-db", tc.db)...)
			if code != tc.exit || strings.Contains(out+errOut, "s3cret") {
				hide := strings.NewReplacer("s3cret", "[PASSWORD]") // not even a test's password in a log
				t.Errorf("courier %s -db %.12q…: exit %d, want %d without the password\nstdout: %s\nstderr: %s", cmd[0], tc.db, code, tc.exit, hide.Replace(out), hide.Replace(errOut))
			}
		}
	}
	if entries, _ := os.ReadDir(wd); len(entries) != 0 {
		t.Fatalf("-db made %d files in the working directory, the first %q", len(entries), entries[0].Name())
	}
}

// TestMigratePrint: -print writes SQL that, applied by another tool (here
// one Exec of the whole text), leaves a database courier opens and
// migrate finds nothing left to do in, on both engines; it never touches
// the database it names.
func TestMigratePrint(t *testing.T) {
	t.Parallel()
	engines := []struct {
		engine, driver string
		db             func(t testing.TB) string
		dsn            func(db string) string
	}{
		{"sqlite", sqlite.DriverName, func(t testing.TB) string { return filepath.Join(t.TempDir(), "app.db") },
			func(db string) string { return sqlite.DSN(db, store.DurabilityFull) }},
		{"postgres", postgres.DriverName, couriertest.PostgresURL, func(db string) string { return db }},
	}
	for _, e := range engines {
		t.Run(e.engine, func(t *testing.T) {
			t.Parallel()
			db := e.db(t)
			byEngine := mustRun(t, exitOK, "migrate", "-print", "-engine", e.engine)
			if byDB := mustRun(t, exitOK, "migrate", "-print", "-db", db); byDB != byEngine {
				t.Fatal("-print -db and -print -engine of the same engine differ")
			}
			if !strings.HasPrefix(byEngine, "-- courier migration 1") || !strings.Contains(byEngine, "courier_schema") {
				t.Fatalf("-print wrote %.200q…", byEngine)
			}
			d, err := sqlx.Open(e.driver, e.dsn(db))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if e.engine == "postgres" {
				var tables int
				if err := d.GetContext(t.Context(), &tables, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'courier_schema'"); err != nil || tables != 0 {
					t.Fatalf("-print -db touched the database: %d version tables, %v", tables, err)
				}
			} else if _, err := os.Stat(db); err == nil {
				t.Fatal("-print -db created the SQLite file")
			}
			if _, err := d.ExecContext(t.Context(), byEngine); err != nil {
				t.Fatalf("applying the printed SQL: %v", err)
			}
			s, err := store.Open(t.Context(), d, store.Config{})
			if err != nil {
				t.Fatalf("Open after the printed SQL: %v", err)
			}
			s.Close()
			mustRun(t, exitOK, "migrate", "-db", db)
		})
	}
	// Each usage error says which command it is about, as the others do.
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"migrate", "-print"}, "courier migrate: -print needs -db or -engine\n"},
		{[]string{"migrate", "-print", "-engine", "mysql"}, "courier migrate: -engine must be sqlite or postgres\n"},
	} {
		if code, _, errOut := courierRun(t, c.args...); code != exitUsage || errOut != c.says {
			t.Errorf("%v: %d %q, want %d %q", c.args, code, errOut, exitUsage, c.says)
		}
	}
}

// TestKeysListsThePayloadKeysInUse: keys prints each payload key id with
// the rows kept under it, and says when none is.
func TestKeysListsThePayloadKeysInUse(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	if out := mustRun(t, exitOK, "keys", "-db", db); out != "no rows are kept under a payload key\n" {
		t.Fatalf("keys before encryption: %q", out)
	}
	enqueue(t, s, "plain", "https://r.example/hooks")
	for i, id := range []string{"k-old", "k-new"} {
		key, err := store.NewPayloadKey(id, bytes.Repeat([]byte{byte(i + 1)}, 32))
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := sqlite.Open(t.Context(), db, store.Config{Encryption: &store.Encryption{Current: id, Keys: []store.PayloadKey{key}}})
		if err != nil {
			t.Fatal(err)
		}
		for j := range i + 1 {
			enqueue(t, sealed, fmt.Sprintf("%s-%d", id, j), "https://r.example/hooks")
		}
		sealed.Close()
	}
	if out := mustRun(t, exitOK, "keys", "-db", db); out != "k-new: 2\nk-old: 1\n" {
		t.Fatalf("keys: %q, want k-new: 2 and k-old: 1", out)
	}
}

// TestSendURLThatDoesNotParseIsNotQuoted: a -url that does not parse is
// refused as a usage error without any of it: a password holding a / or a
// ? (not escaped) ends the URL's authority early, and the parser's error
// would quote part of it as the port.
func TestSendURLThatDoesNotParseIsNotQuoted(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(signature.NewStandardWebhooksSecret()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{
		"https://user:SECRET/x@r.example/hooks",
		"https://user:SECRET?x@r.example/hooks",
		"https://user:SECRET#x@r.example/hooks",
	} {
		code, out, errOut := courierRun(t, "send", "-url", target, "-secret-file", secretFile)
		if strings.Contains(out+errOut, "SECRET") {
			t.Errorf("send -url %q shows the password", strings.ReplaceAll(target, "SECRET", "[SECRET]")) // not the output: it would show it again
		} else if code != exitUsage || !strings.Contains(errOut, "-url is not a URL") {
			t.Errorf("send -url %q: exit %d, stderr %q; want %d, -url is not a URL", strings.ReplaceAll(target, "SECRET", "[SECRET]"), code, errOut, exitUsage)
		}
	}
}

// TestHealthCountsTheEndpointsWhoseBreakerIsNotClosed: during a
// receiver's outage nothing is blocked and nothing is due (its backlog
// waits parked behind its open breaker), so health's status and counts
// alone read as all is well: it also counts the endpoints whose breaker is
// open, half open or disabled, which courier endpoints list names.
func TestHealthCountsTheEndpointsWhoseBreakerIsNotClosed(t *testing.T) {
	t.Parallel()
	db, _ := migrated(t)
	ctx := t.Context()
	s, err := sqlite.Open(ctx, db, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const down = "https://down.example/h"
	enqueue(t, s, "n-1", down)
	enqueue(t, s, "n-2", down)
	p := protocol.For(s)
	claimed, err := p.Claim(ctx, protocol.ClaimParams{Owner: "test", Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claimed %d, %v; want 1", len(claimed), err)
	}
	oc := protocol.Outcome{Lease: claimed[0].Lease, Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Minute}
	if _, err := p.Settle(ctx, oc); err != nil { // one failure opens it
		t.Fatal(err)
	}
	if err := s.Endpoints.Disable(ctx, "https://retired.example/h"); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, exitOK, "health", "-db", db)
	for _, want := range []string{"status: ok", "endpoints open: 1", "endpoints half_open: 0", "endpoints disabled: 1"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("health does not say %q:\n%s", want, out)
		}
	}
}
