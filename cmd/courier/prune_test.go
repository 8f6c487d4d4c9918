package main

import (
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
)

// TestPrune: courier prune deletes, in each table, what is past its age
// and nothing else: a succeeded delivery and the attempts log, but never
// a failed delivery, which waits for an operator; inbox records past
// their own age; replay pairs once expired. It says how many rows went
// from each table.
func TestPrune(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	ctx := t.Context()
	enqueue(t, s, "done", "https://r.example/hooks")
	enqueue(t, s, "broken", "https://r.example/hooks")
	p := protocol.For(s)
	claimed, err := p.Claim(ctx, protocol.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	var failed int64
	for _, c := range claimed {
		oc := protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded}
		if c.NotificationID == "broken" {
			oc = protocol.Outcome{Lease: c.Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: 400}
			failed = c.DeliveryID
		}
		if _, err := p.Settle(ctx, oc); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := protocol.InboxKey{Sender: "sender", Key: "n-1", PayloadSHA256: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}
	if _, err := protocol.InboxFor(s).RecordCompleted(ctx, tx, key, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, nonce := range []string{"spent", "live"} {
		expires := time.Now().Add(-time.Hour) // past, and past the cache's margin
		if nonce == "live" {
			expires = time.Now().Add(time.Hour)
		}
		if _, err := s.Replay.Remember(ctx, "key-1", nonce, expires); err != nil {
			t.Fatal(err)
		}
	}

	if out := mustRun(t, exitOK, "prune", "-db", db); out != "deliveries: 0\nattempts: 0\ninbox: 0\nreplay: 1\n" {
		t.Fatalf("prune with the default ages printed %q, want only the expired replay pair gone", out)
	}
	if out := mustRun(t, exitOK, "prune", "-db", db, "-older-than", "0s", "-inbox-older-than", "0s"); out != "deliveries: 1\nattempts: 2\ninbox: 1\nreplay: 0\n" {
		t.Fatalf("prune of everything finished printed %q, want the succeeded delivery, both attempts and the inbox record", out)
	}
	if d, err := s.Outbox.Get(ctx, failed); err != nil || d.Status != courier.StatusFailed {
		t.Fatalf("the failed delivery after prune: %+v, %v; want it kept for an operator", d, err)
	}
	for _, args := range [][]string{{"-older-than", "-1h"}, {"-inbox-older-than", "-1s"}, {"-max-rows", "-1"}} {
		if code, _, _ := courierRun(t, append([]string{"prune", "-db", db}, args...)...); code != exitUsage {
			t.Errorf("prune %v exited %d, want %d", args, code, exitUsage)
		}
	}
}

// TestFlagOnlyCommandsRefuseAStrayWord: the flag package stops at the
// first word that is not a flag, so the flags after it went unread: a
// prune given "-older-than 720h days -inbox-older-than 2160h" pruned the
// inbox at its default age and exited 0. A command that takes flags only
// refuses a word left over, as a usage error.
func TestFlagOnlyCommandsRefuseAStrayWord(t *testing.T) {
	t.Parallel()
	db, _ := migrated(t)
	for _, args := range [][]string{
		{"prune", "-db", db, "-older-than", "720h", "days", "-inbox-older-than", "2160h"},
		{"health", "-db", db, "stray"},
		{"migrate", "-db", db, "stray"},
		{"secret", "new", "stray"},
		{"send", "stray", "-url", "https://r.example/hooks"},
		{"verify", "stray", "-request", "captured.http"},
	} {
		if code, _, errOut := courierRun(t, args...); code != exitUsage || !strings.Contains(errOut, "unexpected argument") {
			t.Errorf("courier %v exited %d (%q), want %d naming the stray word", args, code, errOut, exitUsage)
		}
	}
}
