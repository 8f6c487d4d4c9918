package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func testInbox(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	in := protocol.InboxFor(b.store)
	k := protocol.InboxKey{Sender: "sender-a", Key: "n-1", PayloadSHA256: digest("body")}

	// Rolled back: nothing recorded.
	tx := b.begin(t)
	if r, err := in.Record(b.ctx, tx, k); err != nil || !r.Fresh {
		t.Fatalf("Record = %+v, %v", r, err)
	}
	tx.Rollback()

	tx = b.begin(t)
	r, err := in.Record(b.ctx, tx, k)
	if err != nil || !r.Fresh {
		t.Fatalf("Record after rollback = %+v, %v, want fresh", r, err)
	}
	ack := []byte(`{"notification_id":"n-1","status":"accepted"}`)
	if err := in.Complete(b.ctx, tx, k, ack); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// A duplicate replays the stored bytes.
	tx = b.begin(t)
	r, err = in.Record(b.ctx, tx, k)
	tx.Rollback()
	if err != nil || r.Fresh || r.InProgress || !bytes.Equal(r.Ack, ack) {
		t.Fatalf("duplicate Record = %+v, %v", r, err)
	}

	// Same key, another body: a collision, nothing written.
	other := k
	other.PayloadSHA256 = digest("other")
	tx = b.begin(t)
	_, err = in.Record(b.ctx, tx, other)
	tx.Rollback()
	if !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("collision Record = %v", err)
	}

	// Recorded already completed (RecordCompleted): a rollback leaves
	// nothing; once committed, duplicates get the stored Ack, which a later
	// RecordCompleted does not overwrite, and another body is a collision.
	done := protocol.InboxKey{Sender: "sender-a", Key: "n-2", PayloadSHA256: digest("body-2")}
	doneAck := []byte(`{"notification_id":"n-2","status":"accepted"}`)
	for _, commit := range []bool{false, true} {
		tx = b.begin(t)
		if r, err := in.RecordCompleted(b.ctx, tx, done, doneAck); err != nil || !r.Fresh {
			t.Fatalf("RecordCompleted (commit %v) = %+v, %v, want fresh", commit, r, err)
		}
		if !commit {
			tx.Rollback()
		} else if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	tx = b.begin(t)
	for _, r := range []func() (protocol.Receipt, error){
		func() (protocol.Receipt, error) { return in.Record(b.ctx, tx, done) },
		func() (protocol.Receipt, error) { return in.RecordCompleted(b.ctx, tx, done, []byte(`{"other":true}`)) },
	} {
		if r, err := r(); err != nil || r.Fresh || r.InProgress || !bytes.Equal(r.Ack, doneAck) {
			t.Fatalf("duplicate of a key recorded completed = %+v, %v, want its Ack", r, err)
		}
	}
	collides := done
	collides.PayloadSHA256 = digest("other")
	if _, err := in.RecordCompleted(b.ctx, tx, collides, doneAck); !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("RecordCompleted of another body = %v, want a collision", err)
	}
	tx.Rollback()

	// The same key from another sender is another notification.
	elsewhere := k
	elsewhere.Sender = "sender-b"
	tx = b.begin(t)
	r, err = in.Record(b.ctx, tx, elsewhere)
	if err != nil || !r.Fresh {
		t.Fatalf("other sender = %+v, %v", r, err)
	}
	// Recorded but not completed, seen from outside the transaction after
	// commit: in progress.
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx = b.begin(t)
	r, err = in.Record(b.ctx, tx, elsewhere)
	if err != nil || !r.InProgress {
		t.Fatalf("in-progress Record = %+v, %v", r, err)
	}
	tx.Rollback()

	// Bad keys are refused before anything is written, by every way in:
	// among them what PostgreSQL's text would refuse (a NUL, invalid
	// UTF-8) in the sender a verifier names or the key a payload carries.
	x := digest("x")
	for _, bad := range []protocol.InboxKey{
		{Sender: "", Key: "k", PayloadSHA256: x}, {Sender: "s", Key: "bad key", PayloadSHA256: x}, {Sender: "s", Key: "k", PayloadSHA256: "short"},
		{Sender: "s" + nul, Key: "k", PayloadSHA256: x}, {Sender: "s" + notUTF8, Key: "k", PayloadSHA256: x}, {Sender: strings.Repeat("s", 257), Key: "k", PayloadSHA256: x},
		{Sender: "s", Key: "k" + nul, PayloadSHA256: x}, {Sender: "s", Key: "k" + notUTF8, PayloadSHA256: x},
	} {
		tx := b.begin(t)
		if _, err := in.Record(b.ctx, tx, bad); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Record(%+v) = %v, want invalid_argument", bad, err)
		}
		if _, err := in.RecordCompleted(b.ctx, tx, bad, []byte(`{}`)); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("RecordCompleted(%+v) = %v, want invalid_argument", bad, err)
		}
		tx.Rollback() // the claim is a transaction of its own
		if _, _, err := in.Claim(b.ctx, bad, time.Minute); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Claim(%+v) = %v, want invalid_argument", bad, err)
		}
	}
}

// testInboxConcurrent runs many transactions recording the same key at
// once: one processes it, every other replays the same Ack.
func testInboxConcurrent(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Now: time.Now})
	k := protocol.InboxKey{Sender: "s", Key: "same", PayloadSHA256: digest("same")}
	const n = 12
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		processed int
		acks      = make([][]byte, n)
		errs      = make(chan error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := b.db.BeginTxx(b.ctx, nil)
			if err != nil {
				errs <- err
				return
			}
			defer tx.Rollback()
			r, err := protocol.InboxFor(b.store).Record(b.ctx, tx, k)
			if err != nil {
				errs <- err
				return
			}
			ack := r.Ack
			if r.Fresh {
				mu.Lock()
				processed++
				mu.Unlock()
				ack = []byte(fmt.Sprintf(`{"by":%d}`, i))
				if err := protocol.InboxFor(b.store).Complete(b.ctx, tx, k, ack); err != nil {
					errs <- err
					return
				}
			}
			if err := tx.Commit(); err != nil {
				errs <- err
				return
			}
			acks[i] = ack
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if processed != 1 {
		t.Fatalf("processed %d times, want once", processed)
	}
	for i := range acks {
		if !bytes.Equal(acks[i], acks[0]) || len(acks[i]) == 0 {
			t.Fatalf("ack %d = %q, ack 0 = %q", i, acks[i], acks[0])
		}
	}
}

// processed commits an inbox record of sender "s", completed, under key.
func (b *bundle) processed(t *testing.T, key string) {
	t.Helper()
	tx := b.begin(t)
	k := protocol.InboxKey{Sender: "s", Key: key, PayloadSHA256: digest(key)}
	if _, err := protocol.InboxFor(b.store).Record(b.ctx, tx, k); err != nil {
		t.Fatal(err)
	}
	if err := protocol.InboxFor(b.store).Complete(b.ctx, tx, k, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func testInboxPrune(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for i := range 25 {
		b.processed(t, fmt.Sprintf("old-%d", i))
	}
	// A two-phase claim its receiver never completed nor released.
	orphan := protocol.InboxKey{Sender: "s", Key: "orphan", PayloadSHA256: digest("orphan")}
	if r, _, err := protocol.InboxFor(b.store).Claim(b.ctx, orphan, time.Minute); err != nil || !r.Fresh {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	b.clock.Advance(48 * time.Hour)
	for i := range 5 {
		b.processed(t, fmt.Sprintf("new-%d", i))
	}
	n, err := b.store.Inbox.Prune(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour, BatchSize: 10, MaxRows: 15})
	if err != nil || n != 15 {
		t.Fatalf("bounded Prune = %d, %v, want 15", n, err)
	}
	n, err = b.store.Inbox.Prune(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour, BatchSize: 4})
	if err != nil || n != 11 {
		t.Fatalf("Prune = %d, %v, want the other 10 and the orphaned claim", n, err)
	}
	var left int
	if err := b.db.GetContext(b.ctx, &left, "SELECT COUNT(*) FROM courier_inbox"); err != nil || left != 5 {
		t.Fatalf("%d records left, want the 5 recent ones (%v)", left, err)
	}
}

func testReplayCache(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	rc := b.store.Replay
	exp := b.clock.Now().Add(time.Minute)
	if replayed, err := rc.Remember(b.ctx, "k1", "nonce-1", exp); err != nil || replayed {
		t.Fatalf("first Remember = %v, %v", replayed, err)
	}
	if replayed, err := rc.Remember(b.ctx, "k1", "nonce-1", exp); err != nil || !replayed {
		t.Fatalf("second Remember = %v, %v, want replayed", replayed, err)
	}
	if replayed, err := rc.Remember(b.ctx, "k2", "nonce-1", exp); err != nil || replayed {
		t.Fatalf("other key = %v, %v", replayed, err)
	}
	// A pair is kept 5 minutes past its expiry: a verifier whose clock
	// runs behind the store's may still accept the signature then.
	b.clock.Advance(2 * time.Minute)
	if replayed, err := rc.Remember(b.ctx, "k1", "nonce-1", b.clock.Now().Add(time.Minute)); err != nil || !replayed {
		t.Fatalf("a minute after expiry = %v, %v, want replayed", replayed, err)
	}
	var pairs int
	if n, err := rc.Prune(b.ctx, store.PruneParams{}); err != nil || n != 2 {
		t.Fatalf("Prune a minute after expiry = %d, %v, want the counts of k1's and k2's expired minute and no pair", n, err)
	}
	if err := b.db.GetContext(b.ctx, &pairs, "SELECT COUNT(*) FROM courier_replay"); err != nil || pairs != 2 {
		t.Fatalf("Prune a minute after expiry left %d pairs (%v), want both", pairs, err)
	}
	b.clock.Advance(5 * time.Minute)
	if replayed, err := rc.Remember(b.ctx, "k1", "nonce-1", b.clock.Now().Add(time.Minute)); err != nil || replayed {
		t.Fatalf("after expiry and the margin = %v, %v, want fresh", replayed, err)
	}
	n, err := rc.Prune(b.ctx, store.PruneParams{})
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v, want the one expired pair", n, err)
	}
	// A key id or nonce that is not text (a NUL, invalid UTF-8, none, or
	// over 256 bytes) is refused on both engines, and nothing is recorded.
	for _, pair := range [][2]string{
		{"k1" + nul, "nonce-2"}, {"k1" + notUTF8, "nonce-2"}, {"", "nonce-2"}, {strings.Repeat("k", 257), "nonce-2"},
		{"k1", "nonce-2" + nul}, {"k1", "nonce-2" + notUTF8}, {"k1", ""}, {"k1", strings.Repeat("n", 257)},
	} {
		if _, err := rc.Remember(b.ctx, pair[0], pair[1], b.clock.Now().Add(time.Minute)); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Remember(%q, %q) = %v, want invalid_argument", pair[0], pair[1], err)
		}
	}
	b.clock.Advance(7 * time.Minute)
	if n, err := rc.Prune(b.ctx, store.PruneParams{}); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v, want the one pair remembered after the first prune and its count", n, err)
	}
}

// testReplayCacheCap: the live nonces of one key id are capped at
// 1,000,000, as in the in-memory cache: past it a new pair is refused
// webhook_signature_rate_abuse with nothing recorded, while a replay is
// still told as one and other keys are unaffected. The cap frees as the
// pairs expire, an expired pair taken over counts again, and Prune drops
// the counts of the minutes that have all expired.
func testReplayCacheCap(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	rc := b.store.Replay
	scalar := func(query string, args ...any) (n int64) {
		t.Helper()
		if err := b.db.GetContext(b.ctx, &n, b.db.Rebind(query), args...); err != nil {
			t.Fatal(err)
		}
		return n
	}
	counted := func(key string) int64 {
		return scalar("SELECT COALESCE(SUM(n), 0) FROM courier_replay_counts WHERE key_id = ?", key)
	}
	remember := func(key, nonce string, want bool, wantErr courier.Code) {
		t.Helper()
		replayed, err := rc.Remember(b.ctx, key, nonce, b.clock.Now().Add(time.Minute))
		if replayed != want || courier.CodeOf(err) != wantErr {
			t.Fatalf("Remember(%s, %s) = %v, %v; want %v, %q", key, nonce, replayed, err, want, wantErr)
		}
	}
	remember("busy", "n-1", false, "")
	if n := counted("busy"); n != 1 {
		t.Fatalf("a recorded pair is counted %d times, want once", n)
	}
	// As if 999,998 more pairs had been recorded: the next is the last.
	if _, err := b.db.ExecContext(b.ctx, "UPDATE courier_replay_counts SET n = n + 999998 WHERE key_id = 'busy'"); err != nil {
		t.Fatal(err)
	}
	remember("busy", "n-2", false, "")
	remember("busy", "n-3", false, courier.CodeWebhookRateAbuse)
	remember("busy", "n-2", true, "")
	remember("other", "n-3", false, "")
	if n := scalar("SELECT COUNT(*) FROM courier_replay WHERE key_id = 'busy'"); n != 2 {
		t.Fatalf("the key at its cap holds %d pairs, want the 2 recorded before it", n)
	}

	// Past expiry, the 5 minutes' margin and the minute counted: free again.
	b.clock.Advance(7 * time.Minute)
	remember("busy", "n-1", false, "") // an expired pair, taken over
	remember("busy", "n-3", false, "")
	if n, err := rc.Prune(b.ctx, store.PruneParams{}); err != nil || n != 4 {
		t.Fatalf("Prune = %d, %v, want the 2 expired pairs and the counts of busy's and other's expired minute", n, err)
	}
	if n := scalar("SELECT COUNT(*) FROM courier_replay"); n != 2 {
		t.Fatalf("after Prune %d pairs are left, want busy's 2 live ones", n)
	}
	if busy, other := counted("busy"), counted("other"); busy != 2 || other != 0 {
		t.Fatalf("after Prune the counts are %d and %d, want the 2 live pairs of busy and none of other", busy, other)
	}
}

func testInboxClaim(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	in := protocol.InboxFor(b.store)
	k := protocol.InboxKey{Sender: "s", Key: "report-0000000000001", PayloadSHA256: digest("r")}
	r, first, err := in.Claim(b.ctx, k, time.Minute)
	if err != nil || !r.Fresh {
		t.Fatalf("first Claim = %+v, %v", r, err)
	}
	// Seen from another request while the first processes: in progress.
	if r, _, err := in.Claim(b.ctx, k, time.Minute); err != nil || !r.InProgress {
		t.Fatalf("concurrent Claim = %+v, %v, want in progress", r, err)
	}
	other := k
	other.PayloadSHA256 = digest("other")
	if _, _, err := in.Claim(b.ctx, other, time.Minute); !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("other body = %v, want a collision", err)
	}
	// The first receiver stalls past the staleness window: taken over.
	b.clock.Advance(2 * time.Minute)
	r, second, err := in.Claim(b.ctx, k, time.Minute)
	if err != nil || !r.Fresh {
		t.Fatalf("Claim of a stale record = %+v, %v, want a takeover", r, err)
	}
	tx := b.begin(t)
	if err := in.CompleteClaim(b.ctx, tx, first, []byte("late")); !errors.Is(err, courier.CodeLeaseLost) {
		t.Fatalf("completing a taken-over claim = %v, want CodeLeaseLost", err)
	}
	tx.Rollback()
	tx = b.begin(t)
	if err := in.CompleteClaim(b.ctx, tx, second, []byte("ack")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if r, _, err := in.Claim(b.ctx, k, time.Minute); err != nil || r.Fresh || r.InProgress || string(r.Ack) != "ack" {
		t.Fatalf("Claim after completion = %+v, %v, want the stored Ack", r, err)
	}
	// A released claim is processed again by the next request.
	k2 := protocol.InboxKey{Sender: "s", Key: "report-0000000000002", PayloadSHA256: digest("r2")}
	_, c, err := in.Claim(b.ctx, k2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.ReleaseClaim(b.ctx, c); err != nil {
		t.Fatal(err)
	}
	if r, _, err := in.Claim(b.ctx, k2, time.Minute); err != nil || !r.Fresh {
		t.Fatalf("Claim after release = %+v, %v", r, err)
	}
}

// testInboxPruneOfAHeldClaim: Prune deletes a claim left processing past
// its age, even one its receiver still holds; that receiver can then not
// complete it (its effects roll back), and the next request claims the
// key anew and completes it, so the notification is processed once.
// Every statement deletes at most BatchSize records.
func testInboxPruneOfAHeldClaim(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	in := protocol.InboxFor(b.store)
	k := protocol.InboxKey{Sender: "s", Key: "report-0000000000001", PayloadSHA256: digest("r")}
	r, held, err := in.Claim(b.ctx, k, 72*time.Hour)
	if err != nil || !r.Fresh {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	for i := range 5 {
		b.processed(t, fmt.Sprintf("other-%d", i))
	}
	b.clock.Advance(48 * time.Hour)
	var batches []int
	n, err := b.store.Inbox.Prune(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour, BatchSize: 2, OnBatch: func(d int) { batches = append(batches, d) }})
	if err != nil || n != 6 || !slices.Equal(batches, []int{2, 2, 2, 0}) {
		t.Fatalf("Prune = %d, %v in batches %v, want the held claim and the 5 other records, 2 a statement", n, err, batches)
	}
	r, again, err := in.Claim(b.ctx, k, 72*time.Hour)
	if err != nil || !r.Fresh {
		t.Fatalf("Claim after Prune = %+v, %v, want a fresh claim", r, err)
	}
	tx := b.begin(t)
	if err := in.CompleteClaim(b.ctx, tx, held, []byte("late")); !errors.Is(err, courier.CodeLeaseLost) {
		t.Fatalf("completing a pruned claim = %v, want CodeLeaseLost", err)
	}
	tx.Rollback()
	tx = b.begin(t)
	if err := in.CompleteClaim(b.ctx, tx, again, []byte("ack")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if r, _, err := in.Claim(b.ctx, k, time.Minute); err != nil || string(r.Ack) != "ack" {
		t.Fatalf("Claim after completion = %+v, %v, want the stored Ack", r, err)
	}
}

// testReplayPruneIsBounded: Replay.Prune deletes the counts of the
// minutes that have expired in bounded statements too, as it does the
// pairs: no statement deletes more than BatchSize rows, and MaxRows bounds
// the pairs and counts a pass deletes together.
func testReplayPruneIsBounded(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	rc := b.store.Replay
	for i := range 5 { // 5 keys: 5 pairs, and a count of each
		if _, err := rc.Remember(b.ctx, fmt.Sprintf("k-%d", i), "n", b.clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	left := func(table string) (n int) {
		t.Helper()
		if err := b.db.GetContext(b.ctx, &n, "SELECT COUNT(*) FROM "+table); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Past expiry, the 5 minutes' margin and the minute counted.
	b.clock.Advance(10 * time.Minute)
	var batches []int
	onBatch := func(d int) { batches = append(batches, d) }
	n, err := rc.Prune(b.ctx, store.PruneParams{BatchSize: 2, MaxRows: 3, OnBatch: onBatch})
	if err != nil || n != 3 || !slices.Equal(batches, []int{2, 1}) {
		t.Fatalf("Prune with MaxRows 3 = %d, %v in batches %v, want 3 pairs, 2 a statement", n, err, batches)
	}
	if pairs, counts := left("courier_replay"), left("courier_replay_counts"); pairs != 2 || counts != 5 {
		t.Fatalf("Prune with MaxRows 3 left %d pairs and %d counts, want 2 and 5: it deleted past MaxRows", pairs, counts)
	}
	batches = nil
	n, err = rc.Prune(b.ctx, store.PruneParams{BatchSize: 2, OnBatch: onBatch})
	sum := 0
	for _, d := range batches {
		sum += d
		if d > 2 {
			t.Errorf("a statement deleted %d rows, want at most BatchSize 2 (batches %v)", d, batches)
		}
	}
	if err != nil || n != 7 || sum != n {
		t.Fatalf("Prune = %d, %v in batches %v, want the other 2 pairs and the 5 counts", n, err, batches)
	}
	if pairs, counts := left("courier_replay"), left("courier_replay_counts"); pairs != 0 || counts != 0 {
		t.Fatalf("Prune left %d pairs and %d counts, want none", pairs, counts)
	}
}
