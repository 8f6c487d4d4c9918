package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/store"
	"github.com/jmoiron/sqlx"
)

func testSchema(t *testing.T, open OpenFunc) {
	db := open(t)
	ctx := t.Context()
	_, err := openStore(t, ctx, db, store.Config{})
	if !errors.Is(err, courier.CodeSchemaOutdated) {
		t.Fatalf("Open before Migrate = %v, want CodeSchemaOutdated", err)
	}
	// The error says what to run: an application that opens its database
	// and forgets Migrate learns it from the error alone.
	if !strings.Contains(err.Error(), "store.Migrate") || !strings.Contains(err.Error(), "courier migrate") {
		t.Errorf("Open before Migrate = %q, want it to name store.Migrate and courier migrate", err)
	}
	for range 2 { // the second run is a no-op
		if err := store.Migrate(ctx, db); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	if _, err := openStore(t, ctx, db, store.Config{}); err != nil {
		t.Fatalf("Open after Migrate: %v", err)
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE courier_outbox ADD COLUMN surprise INTEGER"); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(t, ctx, db, store.Config{}); !errors.Is(err, courier.CodeSchemaAltered) {
		t.Fatalf("Open on an altered schema = %v, want CodeSchemaAltered", err)
	}
	// A newer courier's, which added the column and says this courier
	// must not run on its schema (see testRollingDeployOnAnAdditiveNewerSchema
	// for one that does not say so).
	if _, err := db.ExecContext(ctx, "INSERT INTO courier_schema (version, applied_at) VALUES (999, 0), (-999, 0)"); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(t, ctx, db, store.Config{}); !errors.Is(err, courier.CodeSchemaTooNew) {
		t.Fatalf("Open on a newer schema = %v, want CodeSchemaTooNew", err)
	}
	if err := store.Migrate(ctx, db); !errors.Is(err, courier.CodeSchemaTooNew) {
		t.Fatalf("Migrate on a newer schema = %v, want CodeSchemaTooNew", err)
	}
}

func testEnqueueCommitAndRollback(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})

	// Rolled back: nothing claimable.
	tx := b.begin(t)
	if _, err := b.store.Outbox.Enqueue(b.ctx, tx, delivery("rolled-back")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if c := b.claim(t, "w1", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %d rows after rollback", len(c))
	}

	// Committed through a plain *sql.Tx: claimable, by one claimer only.
	sqlTx, err := b.db.DB.BeginTx(b.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := b.store.Outbox.Enqueue(b.ctx, sqlTx, delivery("committed"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlTx.Commit(); err != nil {
		t.Fatal(err)
	}
	c := b.claim(t, "w1", 10, time.Minute)
	if len(c) != 1 || c[0].DeliveryID != e.ID || c[0].NotificationID != "committed" || c[0].Attempt != 1 {
		t.Fatalf("claim = %+v, want the committed row at attempt 1", c)
	}
	if string(c[0].Payload) != string(delivery("committed").Payload) || len(c[0].Token) < 32 {
		t.Fatalf("claim carries payload %q token %q", c[0].Payload, c[0].Token)
	}
	b.clock.Advance(59 * time.Second)
	if c2 := b.claim(t, "w2", 10, time.Minute); len(c2) != 0 {
		t.Fatalf("second claimer got %d rows under a valid lease", len(c2))
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusLeased || d.LeaseOwner != "w1" {
		t.Fatalf("row is %s by %q, want leased by w1", d.Status, d.LeaseOwner)
	}
	if err := b.complete(c[0].Lease, "ack"); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusSucceeded || d.AckSHA256 != "ack" {
		t.Fatalf("row is %s, want succeeded", d.Status)
	}
}

// testAnEndedContextIsItsOwnError: a call made under a context that has
// ended returns that context's error, with no code of courier's (package
// courier's doc says so): the caller cut it short, nothing failed.
func testAnEndedContextIsItsOwnError(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	id := b.enqueue(t, delivery("n-1")).ID
	ended, cancel := context.WithCancel(b.ctx)
	cancel()
	tx := b.begin(t)
	defer tx.Rollback()
	calls := map[string]func() error{
		"Enqueue on the database": func() error {
			_, err := b.store.Outbox.Enqueue(ended, b.store.DB(), delivery("n-2"))
			return err
		},
		"Enqueue in a transaction": func() error {
			_, err := b.store.Outbox.Enqueue(ended, tx, delivery("n-3"))
			return err
		},
		"Begin":   func() error { _, err := b.store.Begin(ended); return err },
		"Health":  func() error { _, err := b.store.Outbox.Health(ended); return err },
		"List":    func() error { _, err := b.store.Outbox.List(ended, store.ListParams{}); return err },
		"Get":     func() error { _, err := b.store.Outbox.Get(ended, id); return err },
		"Cancel":  func() error { return b.store.Outbox.Cancel(ended, id) },
		"Redrive": func() error { _, err := b.store.Outbox.Redrive(ended, store.RedriveParams{ID: id}); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) || courier.CodeOf(err) != "" {
			t.Errorf("%s under an ended context: %v (code %q), want context.Canceled with no code", name, err, courier.CodeOf(err))
		}
	}
	if d := b.get(t, id); d.Status != courier.StatusPending {
		t.Errorf("delivery %d is %s after the calls, want pending", id, d.Status)
	}
}

func testEnqueueIdempotent(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	p := delivery("n-1")
	first := b.enqueue(t, p)
	if first.Existed {
		t.Fatal("first enqueue reported an existing row")
	}
	again := b.enqueue(t, p)
	if !again.Existed || again.ID != first.ID {
		t.Fatalf("same enqueue = %+v, want the existing row %d", again, first.ID)
	}
	before := b.get(t, first.ID)

	other := p
	other.Payload = []byte(`{"notification_id":"n-1","changed":true}`)
	settings := p
	settings.MaxAttempts = 3
	profile := p
	profile.Profile = "none"
	priority := p
	priority.Priority = 5
	keyID := p
	keyID.KeyID = "k2"
	orderingKey := p
	orderingKey.OrderingKey = "order-1"
	// The error names the field that differs: an application that changed
	// only its Priority (say) is told which, not "different content".
	for field, q := range map[string]store.EnqueueParams{"Payload": other, "MaxAttempts": settings, "Profile": profile,
		"Priority": priority, "KeyID": keyID, "OrderingKey": orderingKey} {
		tx := b.begin(t)
		_, err := b.store.Outbox.Enqueue(b.ctx, tx, q)
		tx.Rollback()
		if !errors.Is(err, courier.CodeIdempotencyCollision) {
			t.Fatalf("different %s: Enqueue = %v, want CodeIdempotencyCollision", field, err)
		}
		if !strings.Contains(err.Error(), "another "+field) {
			t.Errorf("different %s: Enqueue = %q, want it to name %s", field, err, field)
		}
	}
	if after := b.get(t, first.ID); string(after.Payload) != string(before.Payload) || after.PayloadSHA256 != before.PayloadSHA256 || after.MaxAttempts != before.MaxAttempts || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("stored row changed after collisions: %+v", after)
	}

	// Same notification to another endpoint is another delivery.
	elsewhere := p
	elsewhere.Endpoint = "https://other.example/hooks"
	if e := b.enqueue(t, elsewhere); e.Existed || e.ID == first.ID {
		t.Fatalf("other endpoint = %+v, want a new delivery", e)
	}

	// The batch form, in one transaction, with a duplicate inside.
	tx := b.begin(t)
	got, err := b.store.Outbox.EnqueueMany(b.ctx, tx, []store.EnqueueParams{delivery("m-1"), delivery("m-2"), delivery("m-1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got[0].Existed || got[1].Existed || !got[2].Existed || got[2].ID != got[0].ID {
		t.Fatalf("EnqueueMany = %+v", got)
	}
}

// testEnqueueInvalid: what could only fail later, at every attempt, is
// refused at Enqueue with code invalid_argument, and nothing is written.
func testEnqueueInvalid(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	now := b.clock.Now()
	bad := map[string]func(p *store.EnqueueParams){
		"empty id":                   func(p *store.EnqueueParams) { p.NotificationID = "" },
		"id with space":              func(p *store.EnqueueParams) { p.NotificationID = "a b" },
		"empty endpoint":             func(p *store.EnqueueParams) { p.Endpoint = "" },
		"relative endpoint":          func(p *store.EnqueueParams) { p.Endpoint = "/hooks" },
		"endpoint without a host":    func(p *store.EnqueueParams) { p.Endpoint = "https:///hooks" },
		"opaque endpoint":            func(p *store.EnqueueParams) { p.Endpoint = "https:receiver.example" },
		"ftp endpoint":               func(p *store.EnqueueParams) { p.Endpoint = "ftp://receiver.example/hooks" },
		"endpoint over 2048 bytes":   func(p *store.EnqueueParams) { p.Endpoint = "https://receiver.example/" + strings.Repeat("a", 2048) },
		"empty payload":              func(p *store.EnqueueParams) { p.Payload = nil },
		"payload not JSON":           func(p *store.EnqueueParams) { p.Payload = []byte("hello") },
		"payload with trailing data": func(p *store.EnqueueParams) { p.Payload = []byte(`{"a":1} {"b":2}`) },
		"payload with duplicate key": func(p *store.EnqueueParams) { p.Payload = []byte(`{"a":1,"a":2}`) },
		"none profile, not JSON":     func(p *store.EnqueueParams) { p.Profile, p.Payload = "none", []byte("<xml/>") },
		"unknown profile":            func(p *store.EnqueueParams) { p.Profile = "courier.v2" },
		"command profile":            func(p *store.EnqueueParams) { p.Profile = "command" },
		"huge budget":                func(p *store.EnqueueParams) { p.MaxAttempts = 1001 },
		"negative budget":            func(p *store.EnqueueParams) { p.MaxAttempts = -1 },
		"past deadline":              func(p *store.EnqueueParams) { p.Deadline = now.Add(-time.Hour) },
		"deadline now":               func(p *store.EnqueueParams) { p.Deadline = now },
		"deadline at not-before":     func(p *store.EnqueueParams) { p.NotBefore, p.Deadline = now.Add(time.Hour), now.Add(time.Hour) },
		"deadline too far":           func(p *store.EnqueueParams) { p.Deadline = now.Add(store.MaxHorizon + time.Microsecond) },
		"not-before too far":         func(p *store.EnqueueParams) { p.NotBefore = now.Add(store.MaxHorizon + time.Microsecond) },
		"deadline too far after not-before": func(p *store.EnqueueParams) {
			p.NotBefore, p.Deadline = now.Add(time.Hour), now.Add(time.Hour+store.MaxHorizon+time.Microsecond)
		},
		// What PostgreSQL's text refuses and SQLite would keep (a NUL, a
		// byte that is not UTF-8) is refused the same on both, before SQL.
		"id with NUL":            func(p *store.EnqueueParams) { p.NotificationID = "n" + nul },
		"id not UTF-8":           func(p *store.EnqueueParams) { p.NotificationID = "n" + notUTF8 },
		"endpoint with NUL":      func(p *store.EnqueueParams) { p.Endpoint += nul },
		"endpoint not UTF-8":     func(p *store.EnqueueParams) { p.Endpoint += notUTF8 },
		"key id with NUL":        func(p *store.EnqueueParams) { p.KeyID = "k" + nul },
		"key id not UTF-8":       func(p *store.EnqueueParams) { p.KeyID = "k" + notUTF8 },
		"key id over 256 bytes":  func(p *store.EnqueueParams) { p.KeyID = strings.Repeat("k", 257) },
		"profile with NUL":       func(p *store.EnqueueParams) { p.Profile = "courier" + nul },
		"profile not UTF-8":      func(p *store.EnqueueParams) { p.Profile = "courier" + notUTF8 },
		"ordering key with NUL":  func(p *store.EnqueueParams) { p.OrderingKey = "k" + nul },
		"ordering key not UTF-8": func(p *store.EnqueueParams) { p.OrderingKey = "k" + notUTF8 },
	}
	for name, edit := range bad {
		p := delivery("x")
		edit(&p)
		tx := b.begin(t)
		_, err := b.store.Outbox.Enqueue(b.ctx, tx, p)
		_, errMany := b.store.Outbox.EnqueueMany(b.ctx, tx, []store.EnqueueParams{delivery("y"), p})
		tx.Rollback()
		if courier.CodeOf(err) != courier.CodeInvalidArgument || courier.CodeOf(errMany) != courier.CodeInvalidArgument {
			t.Errorf("%s: Enqueue = %v, EnqueueMany = %v; want invalid_argument", name, err, errMany)
		}
	}
	if h := health(t, b); h.Counts[courier.StatusPending] != 0 {
		t.Fatalf("invalid enqueues wrote %d rows", h.Counts[courier.StatusPending])
	}
	// A profile no Config.Profiles knows is named, for the caller to find
	// the typo; one that is not text is not quoted into the error.
	for _, tt := range []struct{ profile, want string }{
		{"courier.v2", `Profile "courier.v2" is not a profile Config.Profiles knows`},
		{"courier" + nul, "Profile must be 1-256 bytes of UTF-8 without NUL"},
	} {
		p := delivery("x")
		p.Profile = tt.profile
		tx := b.begin(t)
		_, err := b.store.Outbox.Enqueue(b.ctx, tx, p)
		tx.Rollback()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Profile %q: Enqueue = %v, want it to say %q", tt.profile, err, tt.want)
		}
	}
	// A payload that is not JSON names the profile, which the caller may
	// have left to its default, and what takes a payload in another format.
	notJSON := delivery("x")
	notJSON.Payload = []byte("order 1 paid")
	tx := b.begin(t)
	_, err := b.store.Outbox.Enqueue(b.ctx, tx, notJSON)
	tx.Rollback()
	for _, want := range []string{`profile "courier"`, "Config.Profiles"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a Payload not JSON: Enqueue = %v, want it to say %q", err, want)
		}
	}

	// At the bounds, and with a NotBefore in the past (it means now).
	good := map[string]func(p *store.EnqueueParams){
		"http endpoint":             func(p *store.EnqueueParams) { p.Endpoint = "http://127.0.0.1:8080/hooks" },
		"endpoint with credentials": func(p *store.EnqueueParams) { p.Endpoint = "https://u:p@receiver.example/h?token=t" },
		"none profile":              func(p *store.EnqueueParams) { p.Profile = "none" },
		"reporting profile":         func(p *store.EnqueueParams) { p.Profile = "reporting" },
		"JSON scalar":               func(p *store.EnqueueParams) { p.Payload = []byte(` "text" `) },
		"deadline at the horizon":   func(p *store.EnqueueParams) { p.Deadline = now.Add(store.MaxHorizon) },
		"not-before at the horizon": func(p *store.EnqueueParams) { p.NotBefore = now.Add(store.MaxHorizon) },
		"not-before in the past":    func(p *store.EnqueueParams) { p.NotBefore = now.Add(-time.Hour) },
		"key id in UTF-8":           func(p *store.EnqueueParams) { p.KeyID = "clé-2026" },
	}
	for name, edit := range good {
		p := delivery("good-" + strings.ReplaceAll(name, " ", "-"))
		edit(&p)
		tx := b.begin(t)
		e, err := b.store.Outbox.Enqueue(b.ctx, tx, p)
		if err != nil {
			tx.Rollback()
			t.Errorf("%s: Enqueue = %v", name, err)
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		d := b.get(t, e.ID)
		first := now
		if p.NotBefore.After(now) {
			first = p.NotBefore
		}
		if !d.NextAttemptAt.Equal(first) {
			t.Errorf("%s: first attempt at %v, want %v", name, d.NextAttemptAt, first)
		}
		if p.Deadline.IsZero() && !d.Deadline.Equal(first.Add(retryHorizon)) {
			t.Errorf("%s: deadline %v, want the first attempt plus the retry horizon", name, d.Deadline)
		}
	}
}

// testCustomProfiles: Config.Profiles is where custom profiles are
// registered; Enqueue accepts what it knows, payload as the application
// wants it, and still refuses what it does not, and a name that is not
// text (a NUL, invalid UTF-8) whatever it says.
func testCustomProfiles(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Profiles: func(name string) (ack.Profile, bool) {
		if strings.HasPrefix(name, "binary.") && name != "binary.v2" { // a lenient registry
			return ack.Profile{Name: name}, true
		}
		return ack.Builtin(name)
	}})
	p := delivery("custom")
	p.Profile, p.Payload = "binary.v1", []byte{0xff, 0x00, 0x01}
	if e := b.enqueue(t, p); b.get(t, e.ID).Profile != "binary.v1" {
		t.Fatal("custom profile not stored")
	}
	// A name that is not text is refused before Profiles is asked: a
	// lenient registry (here, any "binary." name) cannot leave it to
	// PostgreSQL to refuse.
	for _, name := range []string{"binary.v2", "binary." + nul, "binary." + notUTF8} {
		q := delivery("unknown")
		q.Profile = name
		tx := b.begin(t)
		_, err := b.store.Outbox.Enqueue(b.ctx, tx, q)
		tx.Rollback()
		if courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("profile %q: Enqueue = %v, want invalid_argument", name, err)
		}
	}
}

func testStaleLease(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	settles := map[string]func(l protocol.Lease) error{
		"complete": func(l protocol.Lease) error { return b.complete(l, "stale") },
		"retry": func(l protocol.Lease) error {
			return b.retry(l, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503})
		},
		"fail": func(l protocol.Lease) error { return b.fail(l, courier.CodeReceiverRejected, 400) },
	}
	for name, settle := range settles {
		e := b.enqueue(t, delivery("stale-"+name))
		stale := b.claim(t, "stale", 1, 10*time.Second)
		if len(stale) != 1 {
			t.Fatalf("%s: claimed %d", name, len(stale))
		}
		// Expired but not yet reclaimed: already void.
		b.clock.Advance(10 * time.Second)
		if err := settle(stale[0].Lease); !errors.Is(err, courier.CodeLeaseLost) {
			t.Fatalf("%s after expiry = %v, want CodeLeaseLost", name, err)
		}
		// Reclaimed and claimed by a newer worker, who completes.
		b.clock.Advance(5 * time.Second) // past the first retry's backoff
		fresh := b.claim(t, "fresh", 1, 10*time.Second)
		if len(fresh) != 1 || fresh[0].DeliveryID != e.ID || fresh[0].Attempt != 2 || fresh[0].Token == stale[0].Token {
			t.Fatalf("%s: reclaim = %+v", name, fresh)
		}
		if err := settle(stale[0].Lease); !errors.Is(err, courier.CodeLeaseLost) {
			t.Fatalf("%s after reclaim = %v, want CodeLeaseLost", name, err)
		}
		if err := b.complete(fresh[0].Lease, "fresh"); err != nil {
			t.Fatalf("%s: newer Complete: %v", name, err)
		}
		if err := settle(stale[0].Lease); !errors.Is(err, courier.CodeLeaseLost) {
			t.Fatalf("%s after the newer outcome = %v, want CodeLeaseLost", name, err)
		}
		if d := b.get(t, e.ID); d.Status != courier.StatusSucceeded || d.AckSHA256 != "fresh" {
			t.Fatalf("%s: row is %s ack %q, want the newer outcome", name, d.Status, d.AckSHA256)
		}
	}
}

func testParallelClaimers(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Now: time.Now})
	const rows, workers = 300, 6
	tx := b.begin(t)
	for i := range rows {
		if _, err := b.store.Outbox.Enqueue(b.ctx, tx, delivery(fmt.Sprintf("p-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	holders := make(map[int64]string)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for {
				c, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: owner, Limit: 7, Lease: time.Hour})
				if err != nil {
					errs <- err
					return
				}
				if len(c) == 0 {
					return
				}
				mu.Lock()
				for _, d := range c {
					if prev, ok := holders[d.DeliveryID]; ok {
						mu.Unlock()
						errs <- fmt.Errorf("delivery %d claimed by %s and %s under valid leases", d.DeliveryID, prev, owner)
						return
					}
					holders[d.DeliveryID] = owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(holders) != rows {
		t.Fatalf("%d rows claimed, want %d", len(holders), rows)
	}
}

func testQuarantine(t *testing.T, open OpenFunc) {
	settled := hearing(store.EventSettled)
	b := setup(t, open, store.Config{Hook: settled.hook})
	var ids []int64
	for _, id := range []string{"q-1", "q-2", "q-3"} {
		ids = append(ids, b.enqueue(t, delivery(id)).ID)
	}
	b.alterPayload(t, ids[1], []byte(`{"tampered":true}`))
	c := b.claim(t, "w", 10, time.Minute)
	got := []int64{}
	for _, d := range c {
		got = append(got, d.DeliveryID)
	}
	if !slices.Equal(got, []int64{ids[0], ids[2]}) {
		t.Fatalf("claimed %v, want %v", got, []int64{ids[0], ids[2]})
	}
	d := b.get(t, ids[1])
	if d.Status != courier.StatusQuarantined || d.LastErrorCode != courier.CodeIntegrity {
		t.Fatalf("tampered row is %s/%s, want quarantined/integrity_mismatch", d.Status, d.LastErrorCode)
	}
	heard := settled.take()
	if want := (store.Event{Kind: store.EventSettled, N: 1, Status: courier.StatusQuarantined, Code: courier.CodeIntegrity}); len(heard) != 1 || heard[0] != want {
		t.Fatalf("the Hook heard %+v of the claim, want %+v", heard, want)
	}
	h := health(t, b)
	if h.Status != store.HealthBlocked || h.Code != courier.CodeIntegrity || h.Counts[courier.StatusQuarantined] != 1 {
		t.Fatalf("health = %+v", h)
	}
	// The others are unaffected.
	for _, d := range c {
		if err := b.complete(d.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}
}

// testPanickingHook: a Hook that panics at every event changes nothing
// the Store does: the enqueue, the claim and the settle it hears all
// return and hold, and the claim's caller, a worker's goroutine, goes on.
func testPanickingHook(t *testing.T, open OpenFunc) {
	heard := 0
	b := setup(t, open, store.Config{Hook: func(store.Event) { heard++; panic("hook") }})
	id := b.enqueue(t, delivery("panicking-hook")).ID
	c := b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 || c[0].DeliveryID != id {
		t.Fatalf("claimed %+v, want delivery %d", c, id)
	}
	if err := b.complete(c[0].Lease, "a"); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if d := b.get(t, id); d.Status != courier.StatusSucceeded {
		t.Fatalf("delivery is %s, want succeeded", d.Status)
	}
	if heard != 3 {
		t.Fatalf("the Hook was called %d times, want 3 (enqueued, claimed, settled)", heard)
	}
}

// testRetryDelay: a retry is due exactly the delay the worker's policy
// chose after it was settled, and not claimable before.
func testRetryDelay(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	e := b.enqueue(t, delivery("r"))
	for i, delay := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 0} {
		c := b.claim(t, "w", 1, time.Minute)
		if len(c) != 1 || c[0].Attempt != i+1 {
			t.Fatalf("attempt %d: claim = %+v", i+1, c)
		}
		if err := b.settle(protocol.Outcome{Lease: c[0].Lease, Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: delay}); err != nil {
			t.Fatal(err)
		}
		d := b.get(t, e.ID)
		if d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeReceiverUnavailable || d.LastHTTPStatus != 503 {
			t.Fatalf("after retry: %s %s %d", d.Status, d.LastErrorCode, d.LastHTTPStatus)
		}
		if got := d.NextAttemptAt.Sub(b.clock.Now()); got != delay {
			t.Fatalf("attempt %d: delay %v, want %v", i+1, got, delay)
		}
		if delay > 0 {
			b.clock.Advance(delay - time.Millisecond)
			if c := b.claim(t, "w", 1, time.Minute); len(c) != 0 {
				t.Fatalf("claimed before the delay ended")
			}
			b.clock.Advance(time.Millisecond)
		}
	}
}

func testRetryBudgetAndHorizon(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	p := delivery("budget")
	p.MaxAttempts = 2
	budget := b.enqueue(t, p)
	for attempt := 1; attempt <= 2; attempt++ {
		c := b.claim(t, "w", 1, time.Minute)
		if len(c) != 1 {
			t.Fatalf("attempt %d not claimable", attempt)
		}
		if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeNetwork}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Hour)
	}
	if d := b.get(t, budget.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeNetwork || d.Attempts != 2 {
		t.Fatalf("budget spent: %s/%s after %d, want failed/network_error after 2", d.Status, d.LastErrorCode, d.Attempts)
	}

	q := delivery("horizon")
	q.Deadline = b.clock.Now().Add(3 * time.Second)
	horizon := b.enqueue(t, q)
	c := b.claim(t, "w", 1, time.Minute)
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeTimeout, Delay: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if d := b.get(t, horizon.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired {
		t.Fatalf("past the horizon: %s/%s, want failed/expired", d.Status, d.LastErrorCode)
	}

	// A lease that expires on the last attempt fails the delivery.
	r := delivery("last-lease")
	r.MaxAttempts = 1
	last := b.enqueue(t, r)
	if c := b.claim(t, "w", 1, time.Second); len(c) != 1 {
		t.Fatal("not claimed")
	}
	b.clock.Advance(time.Second)
	b.claim(t, "w", 1, time.Second) // reclaims
	if d := b.get(t, last.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeLeaseExpired {
		t.Fatalf("expired last lease: %s/%s, want failed/lease_expired", d.Status, d.LastErrorCode)
	}
}

// testReclaimIsBounded: a claim takes back at most a batch's worth of
// expired leases (protocol.MaxClaimBatch), the first to expire first, and
// leaves the rest to the claims after it, each lease's attempt logged
// once. Every lease a crashed fleet of workers held expires at about the
// same time; the first claim after it took them all back in one
// transaction, as long as the whole fleet's batches, holding the one
// writer on SQLite meanwhile.
func testReclaimIsBounded(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	const n = 2*protocol.MaxClaimBatch + 500
	if _, err := inCommitted(t, b, func(tx *sqlx.Tx) (int, error) {
		for i := range n {
			if _, err := b.store.Outbox.Enqueue(b.ctx, tx, delivery(fmt.Sprintf("n-%d", i))); err != nil {
				return i, err
			}
		}
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	// The batches expire in another order than they were leased (and
	// than their ids): the second first, then the third, then the first.
	var first []protocol.Claimed // the leases that expire first
	for i, lease := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second} {
		c := b.claim(t, "crashed", protocol.MaxClaimBatch, lease)
		if want := min(protocol.MaxClaimBatch, n-i*protocol.MaxClaimBatch); len(c) != want {
			t.Fatalf("the crashed worker's batch %d: %d leased, want %d", i, len(c), want)
		}
		if i == 1 {
			first = c
		}
		b.clock.Advance(time.Millisecond)
	}
	b.clock.Advance(time.Minute)

	leasedNow := func() (count int) {
		t.Helper()
		if err := b.db.GetContext(b.ctx, &count, "SELECT COUNT(*) FROM courier_outbox WHERE status = 'leased'"); err != nil {
			t.Fatal(err)
		}
		return count
	}
	c := b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 {
		t.Fatalf("the first claim after the expiry leased %d, want 1", len(c))
	}
	if got, want := leasedNow(), n-protocol.MaxClaimBatch+1; got != want {
		t.Fatalf("after the first claim, %d deliveries leased, want %d: the %d expired leases left but a batch's worth, and the one it leased",
			got, want, n)
	}
	for _, c := range first {
		if d := b.get(t, c.DeliveryID); d.Status == courier.StatusLeased && d.LeaseOwner == "crashed" {
			t.Fatalf("delivery %d, of the batch whose leases expired first, was not taken back first", c.DeliveryID)
		}
	}
	for range 3 {
		b.claim(t, "w", 1, time.Minute)
	}
	if got := leasedNow(); got != 4 {
		t.Errorf("after four claims, %d deliveries leased, want the 4 they leased", got)
	}
	var logged, twice int
	if err := b.db.GetContext(b.ctx, &logged, "SELECT COUNT(*) FROM courier_attempts WHERE outcome = 'lease_expired'"); err != nil {
		t.Fatal(err)
	}
	if err := b.db.GetContext(b.ctx, &twice, "SELECT COUNT(*) FROM (SELECT delivery_id FROM courier_attempts WHERE outcome = 'lease_expired' GROUP BY delivery_id HAVING COUNT(*) > 1) AS d"); err != nil {
		t.Fatal(err)
	}
	if logged != n || twice != 0 {
		t.Errorf("%d expired leases logged, %d deliveries twice; want %d, each once", logged, twice, n)
	}
}

func testClaimOrder(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var want []string
	add := func(id string, priority int) {
		p := delivery(id)
		p.Priority = priority
		b.enqueue(t, p)
		b.clock.Advance(time.Millisecond)
	}
	add("late-low", 5)
	add("old-normal", 0)
	add("urgent", -1)
	add("new-normal", 0)
	want = []string{"urgent", "old-normal", "new-normal", "late-low"}
	var got []string
	for {
		c := b.claim(t, "w", 1, time.Minute)
		if len(c) == 0 {
			break
		}
		got = append(got, c[0].NotificationID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("claim order %v, want %v", got, want)
	}
	// A delayed delivery waits for its time.
	p := delivery("delayed")
	p.NotBefore = b.clock.Now().Add(time.Minute)
	b.enqueue(t, p)
	if c := b.claim(t, "w", 1, time.Minute); len(c) != 0 {
		t.Fatal("delayed delivery claimed early")
	}
	b.clock.Advance(time.Minute)
	if c := b.claim(t, "w", 1, time.Minute); len(c) != 1 {
		t.Fatal("delayed delivery not claimed when due")
	}
}

func testAttemptsLog(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	e := b.enqueue(t, delivery("log"))
	c := b.claim(t, "w1", 1, 10*time.Second)
	b.clock.Advance(11 * time.Second)
	c2 := b.claim(t, "w2", 1, 10*time.Second) // reclaims w1's lease; due at once
	if len(c2) != 1 {
		t.Fatal("not reclaimed")
	}
	res, err := b.proto().Settle(b.ctx,
		protocol.Outcome{Lease: c2[0].Lease, Result: protocol.Retry, Code: courier.CodeRateLimited, HTTPStatus: 429, Duration: 150 * time.Millisecond},
		protocol.Outcome{Lease: c[0].Lease, Result: protocol.Succeeded},
	)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != courier.StatusRetryWait || res[0].Err != nil || !errors.Is(res[1].Err, courier.CodeLeaseLost) {
		t.Fatalf("Settle = %+v", res)
	}
	b.clock.Advance(time.Hour)
	c3 := b.claim(t, "w3", 1, 10*time.Second)
	if err := b.fail(c3[0].Lease, courier.CodeAckInvalid, 200); err != nil {
		t.Fatal(err)
	}
	attempts, err := b.store.Outbox.Attempts(b.ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		n       int
		owner   string
		outcome store.AttemptOutcome
		status  int
		code    courier.Code
	}
	var got []row
	for _, a := range attempts {
		got = append(got, row{a.Attempt, a.Owner, a.Outcome, a.HTTPStatus, a.ErrorCode})
		if a.LeaseExpiresAt.Sub(a.LeasedAt) != 10*time.Second || a.DeliveryID != e.ID {
			t.Fatalf("attempt %+v lease window", a)
		}
	}
	want := []row{
		{1, "w1", "lease_expired", 0, courier.CodeLeaseExpired},
		{2, "w2", "retry", 429, courier.CodeRateLimited},
		{3, "w3", "failed", 200, courier.CodeAckInvalid},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("attempts log\n got %+v\nwant %+v", got, want)
	}
	if attempts[1].Duration != 150*time.Millisecond {
		t.Fatalf("duration %v", attempts[1].Duration)
	}
}

func testHealth(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	if h := health(t, b); h.Status != store.HealthOK || h.Due != 0 || len(h.Counts) != len(courier.Statuses()) {
		t.Fatalf("empty health = %+v", h)
	}
	for i := range 4 {
		b.enqueue(t, delivery(fmt.Sprintf("h-%d", i)))
	}
	b.clock.Advance(90 * time.Second)
	h := health(t, b)
	if h.Status != store.HealthOK || h.Due != 4 || h.Counts[courier.StatusPending] != 4 || h.OldestDueAge != 90*time.Second {
		t.Fatalf("health with due rows = %+v", h)
	}
	c := b.claim(t, "w", 2, time.Minute)
	if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	h = health(t, b)
	if h.Status != store.HealthBlocked || h.Code != courier.CodeFailedPresent || h.Failed != 1 || h.Counts[courier.StatusLeased] != 1 || h.Due != 2 {
		t.Fatalf("health with a failure = %+v", h)
	}
	b.clock.Advance(2 * time.Minute)
	h = health(t, b)
	if h.Code != courier.CodeLeasesExpired || h.ExpiredLeases != 1 {
		t.Fatalf("health with an expired lease = %+v", h)
	}
}

func testCheckConstraints(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	e := b.enqueue(t, delivery("c"))
	bad := []string{
		"UPDATE courier_outbox SET status = 'leased' WHERE id = ?",
		"UPDATE courier_outbox SET lease_owner = 'x' WHERE id = ?",
		"UPDATE courier_outbox SET status = 'done' WHERE id = ?",
		"UPDATE courier_outbox SET status = 'failed' WHERE id = ?",
		"UPDATE courier_outbox SET status = 'succeeded' WHERE id = ?",
		"UPDATE courier_outbox SET attempts = max_attempts + 1 WHERE id = ?",
	}
	for _, q := range bad {
		if _, err := b.db.ExecContext(b.ctx, b.db.Rebind(q), e.ID); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusPending || d.Attempts != 0 {
		t.Fatalf("row changed: %+v", d)
	}
}

func health(t *testing.T, b *bundle) store.Health {
	t.Helper()
	h, err := b.store.Outbox.Health(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func testWakeups(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Now: time.Now})
	ch, stop, err := b.proto().Listen(b.ctx)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer stop()
	woken := func(after string) {
		t.Helper()
		select {
		case _, ok := <-ch:
			if !ok {
				t.Fatal("listener closed")
			}
		case <-time.After(10 * time.Second): // a bound on failure, not a wait for success
			t.Fatalf("no wake-up after %s", after)
		}
	}
	b.enqueue(t, delivery("wake"))
	woken("a committed enqueue")
	c := b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 {
		t.Fatalf("woken worker claimed %d rows", len(c))
	}

	// An operator's action that makes a delivery due without an insert
	// wakes workers too: they send it now, not at their next poll. (A
	// release does not: a worker gives back what it cannot send, and
	// woken by that it would claim it again at once.)
	if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: c[0].DeliveryID}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	woken("a redrive")
	if err := b.store.Endpoints.Disable(b.ctx, c[0].Endpoint); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Endpoints.Enable(b.ctx, c[0].Endpoint); err != nil {
		t.Fatal(err)
	}
	woken("an Enable")
	if c := b.claim(t, "w", 1, time.Minute); len(c) != 1 {
		t.Fatalf("woken worker claimed %d rows", len(c))
	}
}

// testRedriveStopsAtTheAttemptBound: a failed delivery that has made
// 1,000 attempts, the most a delivery may make, stays failed when redriven:
// with no attempt left to give it, leasing it again would break the
// table's attempts <= max_attempts rule and fail every claim after it.
func testRedriveStopsAtTheAttemptBound(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	spent := b.enqueue(t, delivery("spent"))
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind(`UPDATE courier_outbox SET status = 'failed', last_error_code = 'receiver_unavailable',
		attempts = 1000, max_attempts = 1000 WHERE id = ?`), spent.ID); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, delivery("other"))
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{}); err != nil || n != 0 {
		t.Fatalf("Redrive = %d, %v; want 0 moved", n, err)
	}
	if d := b.get(t, spent.ID); d.Status != courier.StatusFailed || d.Attempts != 1000 {
		t.Fatalf("the spent delivery is %s after %d attempts, want still failed after 1000", d.Status, d.Attempts)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("claimed %v, want other", got)
	}
}

// testEnqueueThroughADatabaseIsOneTransaction: given a database or a
// connection rather than a transaction (DBTX allows *sql.DB, *sqlx.DB,
// *sql.Conn and *sqlx.Conn), Enqueue still
// writes a delivery whole or not at all. The caller's context ending
// between its statements (the row inserted, not yet joined to its
// ordering key) left the row behind, waiting for a key it never joined:
// never sent, and found as it was by the caller's retry.
func testEnqueueThroughADatabaseIsOneTransaction(t *testing.T, open OpenFunc) {
	var cancel context.CancelFunc
	// The request ends right after the row is inserted: when the insert's
	// span ends, before the ordering key is joined.
	b := setup(t, open, store.Config{Tracer: &tracingtest.Recorder{OnEnd: func(s *tracingtest.Span) {
		if s.Name == tracing.SpanEnqueue && cancel != nil {
			cancel()
		}
	}}})
	// A connection whose transaction a cancelled context ended may be
	// discarded (database/sql's rule): each attempt takes its own.
	conn := func() store.DBTX {
		c, err := b.db.Conn(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	connx := func() store.DBTX {
		c, err := b.db.Connx(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for i, db := range []func() store.DBTX{
		func() store.DBTX { return b.db },
		func() store.DBTX { return b.db.DB },
		conn,
		connx,
	} {
		p := keyed(fmt.Sprintf("n-%d", i), fmt.Sprintf("order-%d", i))
		var reqCtx context.Context
		reqCtx, cancel = context.WithCancel(t.Context())
		if _, err := b.store.Outbox.Enqueue(reqCtx, db(), p); err == nil {
			t.Fatalf("Enqueue through %T with its context cancelled midway succeeded", db())
		}
		cancel = nil
		if _, err := b.store.Outbox.Lookup(b.ctx, p.NotificationID, p.Endpoint); !errors.Is(err, courier.CodeNotFound) {
			t.Fatalf("after the failed Enqueue through %T, Lookup = %v: want nothing written", db(), err)
		}
		e, err := b.store.Outbox.Enqueue(b.ctx, db(), p) // the application retries
		if err != nil || e.Existed {
			t.Fatalf("retried Enqueue through %T = %+v, %v; want a new delivery", db(), e, err)
		}
		if c := b.claim(t, "w", 5, time.Minute); len(c) != 1 || c[0].DeliveryID != e.ID {
			t.Fatalf("claim = %v, want the delivery enqueued through %T, head of its key", ids(c), db())
		}
	}
}

// ctxDB is an application's own database handle, of a kind many
// applications have: its statements go into the transaction their context
// carries, when it carries one.
type ctxDB struct{ *sqlx.DB }

type ctxTxKey struct{}

func (d ctxDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if tx, ok := ctx.Value(ctxTxKey{}).(*sqlx.Tx); ok {
		return tx.ExecContext(ctx, q, args...)
	}
	return d.DB.ExecContext(ctx, q, args...)
}

func (d ctxDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if tx, ok := ctx.Value(ctxTxKey{}).(*sqlx.Tx); ok {
		return tx.QueryContext(ctx, q, args...)
	}
	return d.DB.QueryContext(ctx, q, args...)
}

func (d ctxDB) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if tx, ok := ctx.Value(ctxTxKey{}).(*sqlx.Tx); ok {
		return tx.QueryRowContext(ctx, q, args...)
	}
	return d.DB.QueryRowContext(ctx, q, args...)
}

// testEnqueueThroughAnApplicationsHandleGoesWhereItSends: an application's
// own handle is used as it is, though it embeds a *sqlx.DB: its statements
// go into the transaction its context carries, so a delivery enqueued
// through it rolls back with the application's transaction. Given a
// transaction of courier's own, the delivery outlived the rollback.
func testEnqueueThroughAnApplicationsHandleGoesWhereItSends(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	tx := b.begin(t)
	ctx := context.WithValue(b.ctx, ctxTxKey{}, tx)
	p := delivery("rolled-back")
	if _, err := b.store.Outbox.Enqueue(ctx, ctxDB{b.db}, p); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil { // the application's transaction fails
		t.Fatal(err)
	}
	if _, err := b.store.Outbox.Lookup(b.ctx, p.NotificationID, p.Endpoint); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("after the application's rollback, Lookup = %v: want nothing written", err)
	}
}

// testEnqueueAgainAfterItsDeadline: the same enqueue made again once its
// absolute Deadline has passed (an application's transaction retried
// later) finds the delivery it wrote in time, as any retry does; a new
// delivery with that deadline is still refused.
func testEnqueueAgainAfterItsDeadline(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	p := delivery("d")
	p.Deadline = b.clock.Now().Add(time.Minute)
	first := b.enqueue(t, p)
	c := b.claim(t, "w", 1, 10*time.Second)
	if err := b.complete(c[0].Lease, "a"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute)
	if e, err := b.store.Outbox.Enqueue(b.ctx, b.db, p); err != nil || !e.Existed || e.ID != first.ID {
		t.Fatalf("the same enqueue after its deadline = %+v, %v; want the delivery written in time, Existed", e, err)
	}
	p.NotificationID = "new"
	if _, err := b.store.Outbox.Enqueue(b.ctx, b.db, p); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("a new delivery past its deadline = %v, want invalid_argument", err)
	}
	if _, err := b.store.Outbox.Lookup(b.ctx, "new", p.Endpoint); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("the refused delivery: Lookup = %v, want nothing written", err)
	}
}

// testEnqueueInItsOwnTransactionIsCountedOnceCommitted: given a database,
// EnqueueMany writes in a transaction of its own; when a later delivery is
// refused it rolls back and returns the error, and the Hook counted
// nothing (it counted the first delivery as it was inserted). One that
// commits is counted, once.
func testEnqueueInItsOwnTransactionIsCountedOnceCommitted(t *testing.T, open OpenFunc) {
	var mu sync.Mutex
	enqueued := 0
	b := setup(t, open, store.Config{Hook: func(e store.Event) {
		if e.Kind == store.EventEnqueued {
			mu.Lock()
			enqueued += e.N
			mu.Unlock()
		}
	}})
	count := func() int { mu.Lock(); defer mu.Unlock(); return enqueued }
	bad := delivery("b")
	bad.Endpoint = "not a url"
	if _, err := b.store.Outbox.EnqueueMany(b.ctx, b.db, []store.EnqueueParams{delivery("a"), bad}); err == nil {
		t.Fatal("EnqueueMany with an invalid endpoint succeeded")
	}
	if n := count(); n != 0 {
		t.Fatalf("EnqueueMany wrote nothing, and the Hook counted %d enqueued", n)
	}
	if _, err := b.store.Outbox.EnqueueMany(b.ctx, b.db, []store.EnqueueParams{delivery("a"), delivery("c")}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("EnqueueMany committed 2, and the Hook counted %d", n)
	}
}

// testAPanickingBuildLeavesNothingHeld: a Publish given a database writes
// in a transaction of its own and runs the application's Build in it; a
// Build that panics (a template's bug, recovered by an HTTP server) must
// not leave that transaction open, holding SQLite's one write lock (and on
// PostgreSQL a connection idle in a transaction) for good.
func testAPanickingBuildLeavesNothingHeld(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	if _, err := b.store.Subscriptions.Create(b.ctx, nil, subscription("acme", fastEndpoint, "k", "*")); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Build's panic did not go on up")
			}
		}()
		_, _ = b.store.Outbox.Publish(b.ctx, b.db, store.PublishParams{Tenant: "acme", EventType: "x", EventID: "e1",
			Build: func(store.Subscription, string) ([]byte, error) { panic("template bug") }})
	}()
	if _, err := b.store.Outbox.Enqueue(b.ctx, b.db, delivery("after")); err != nil {
		t.Fatalf("an enqueue after a Build's recovered panic: %v", err)
	}
}

// testACallInAnEndedTransactionIsRefused: an enqueue (or publish, or
// command) made in the application's transaction after it was committed
// or rolled back is the application's mistake, said as such
// (invalid_argument, naming the ended transaction), not a database that
// is down (database_unavailable), which would have it retried for ever;
// nothing is written.
func testACallInAnEndedTransactionIsRefused(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, end := range []string{"committed", "rolled-back"} {
		tx := b.begin(t)
		var err error
		if end == "committed" {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		calls := map[string]func() error{
			"Enqueue": func() error { _, err := b.store.Outbox.Enqueue(b.ctx, tx, delivery("late-"+end)); return err },
			"Publish": func() error {
				_, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "t", EventType: "e", EventID: "late-" + end, Payload: []byte(`{}`)})
				return err
			},
		}
		for name, call := range calls {
			err := call()
			if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "transaction has ended") {
				t.Errorf("%s in a transaction %s = %v; want invalid_argument saying the transaction has ended", name, end, err)
			}
		}
	}
	if c := b.claim(t, "w1", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %d deliveries enqueued in ended transactions", len(c))
	}
}
