package main

import (
	"testing"
	"time"
)

// TestEndToEnd is the HTTP issue's proof: 1,000 notifications enqueued in
// business transactions, a fifth rolled back, delivered through a receiver
// that answers every first attempt 503, rate-limits a tenth of the others
// (429 with Retry-After), drops a tenth of the connections after it
// committed, and answers some after the sender's timeout.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	s, err := run(t.Context(), options{n: 1000, faults: true, seed: 7, limit: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ok() {
		t.Fatalf("verdict failed: %+v", s)
	}
	if s.rolledBack < 150 || s.committed+s.rolledBack != 1000 {
		t.Fatalf("%d committed, %d rolled back", s.committed, s.rolledBack)
	}
	// The faults happened, and the redeliveries they caused were answered
	// from the Inbox with the stored Ack (which the sender verified exactly,
	// or the delivery would have failed with ack_invalid).
	if s.faults < s.committed || s.retries < s.committed || s.duplicates == 0 {
		t.Fatalf("too few faults exercised: %+v", s)
	}
}

// TestResume stops a run midway and starts it again on the same folder:
// the second run finishes the same notifications with the same verdict.
func TestResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The first run is cut off by its time limit, normally midway through
	// the deliveries (the faults make them take several seconds); whatever
	// it got done, the second run must finish the rest.
	_, err := run(t.Context(), options{n: 200, faults: true, seed: 3, dir: dir, limit: time.Second})
	t.Logf("first run ended with: %v", err)
	s, err := run(t.Context(), options{n: 200, faults: true, seed: 3, dir: dir, limit: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ok() || s.committed+s.rolledBack != 200 {
		t.Fatalf("resumed run: %+v", s)
	}
}
