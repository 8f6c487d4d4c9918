package main

import (
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/endpoint"
)

// TestPinOfAnEndpointTheDatabaseDoesNotKnowSaysSoAndUnpinUndoesIt:
// contracts pin of a URL with a typo in its path printed "pinned: …",
// exit 0, with no word more, where endpoints limit warns; the pin could
// never be removed, and it made the typo an endpoint the database knows,
// so that deliveries cancel -endpoint of it printed "cancelled: 0", exit
// 0, in place of failing for an unknown endpoint. pin still pins (a pin
// ahead of an endpoint's commands is allowed) and says on stderr that the
// database knew no such endpoint, naming contracts unpin, which removes
// the pin: the typo is unknown again. An unpin of no pin fails, exit 1.
func TestPinOfAnEndpointTheDatabaseDoesNotKnowSaysSoAndUnpinUndoesIt(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	const hook, typo = "https://r.example/hooks", "https://r.example/hook"
	enqueue(t, s, "n-1", hook)
	digest := strings.Repeat("a", 64)
	ref := endpoint.Ref(typo)

	code, out, errOut := courierRun(t, "contracts", "pin", "-db", db, typo, digest)
	if want := "no endpoint the database knows is https://r.example/… (ref " + ref + ")"; code != exitOK || !strings.HasPrefix(out, "pinned: ") ||
		!strings.Contains(errOut, want) || !strings.Contains(errOut, "courier contracts unpin undoes it") {
		t.Fatalf("pin of a URL the database does not know: exit %d, %q, stderr %q; want it pinned, and stderr saying %q and how to undo it", code, out, errOut, want)
	}
	if out := mustRun(t, exitOK, "deliveries", "cancel", "-db", db, "-endpoint", typo); out != "cancelled: 0\n" {
		t.Fatalf("cancel of the pinned typo: %q, want it known by its pin, with nothing to cancel", out)
	}
	if out, want := mustRun(t, exitOK, "contracts", "unpin", "-db", db, typo), "unpinned: https://r.example/… (ref "+ref+") "+digest+"\n"; out != want {
		t.Fatalf("unpin: %q, want %q", out, want)
	}
	if _, err := s.Contracts.Get(t.Context(), typo); err == nil {
		t.Fatal("the pin is there after unpin")
	}
	code, out, errOut = courierRun(t, "deliveries", "cancel", "-db", db, "-endpoint", typo)
	if code != exitFailed || out != "" || !strings.Contains(errOut, "no endpoint the database knows") {
		t.Errorf("cancel of the typo once unpinned: exit %d, %q, stderr %q; want %d, an endpoint the database does not know", code, out, errOut, exitFailed)
	}
	for _, arg := range []string{typo, ref} {
		code, out, errOut = courierRun(t, "contracts", "unpin", "-db", db, arg)
		if code != exitFailed || out != "" || !(strings.Contains(errOut, "no contract pin for") || strings.Contains(errOut, "no endpoint the database knows has ref")) {
			t.Errorf("unpin %s with no pin: exit %d, %q, stderr %q; want %d saying there is none", arg, code, out, errOut, exitFailed)
		}
	}

	// A pin of a known endpoint warns of nothing; unpin takes its ref.
	if code, out, errOut := courierRun(t, "contracts", "pin", "-db", db, hook, digest); code != exitOK || errOut != "" {
		t.Errorf("pin of a known endpoint: exit %d, %q, stderr %q; want nothing on stderr", code, out, errOut)
	}
	if out := mustRun(t, exitOK, "contracts", "unpin", "-db", db, endpoint.Ref(hook)); !strings.HasPrefix(out, "unpinned: ") {
		t.Errorf("unpin by ref: %q", out)
	}
}

// TestUnpinOfAPinHoldingCommandsBackFails: a pin that holds commands back
// (enqueued under another digest) stays, for without it they would be
// sent: unpin fails, exit 1, saying how many it holds back and what
// resolves them; once their digest is pinned again, it unpins.
func TestUnpinOfAPinHoldingCommandsBackFails(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	const source = "https://source.example/commands"
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	enqueueCommand(t, s, source, "r-1", a)
	mustRun(t, exitOK, "contracts", "pin", "-db", db, source, b)
	code, out, errOut := courierRun(t, "contracts", "unpin", "-db", db, source)
	if code != exitFailed || out != "" || !strings.Contains(errOut, "holds back 1 of the endpoint's deliveries") || !strings.Contains(errOut, "courier contracts fail-mismatched") {
		t.Fatalf("unpin of a pin holding a command back: exit %d, %q, stderr %q; want %d saying so and what resolves it", code, out, errOut, exitFailed)
	}
	if k, err := s.Contracts.Get(t.Context(), source); err != nil || k.CapabilitiesSHA256 != b {
		t.Fatalf("the pin after the refused unpin: %+v, %v; want b still", k, err)
	}
	mustRun(t, exitOK, "contracts", "pin", "-db", db, source, a)
	if out, want := mustRun(t, exitOK, "contracts", "unpin", "-db", db, source), "unpinned: https://source.example/… (ref "+endpoint.Ref(source)+") "+a+"\n"; out != want {
		t.Fatalf("unpin once nothing is held back: %q, want %q", out, want)
	}
}

// TestFailMismatchedOfAnEndpointTheDatabaseDoesNotKnowFails: contracts
// fail-mismatched of a URL with a typo in its path printed "failed: 0",
// exit 0, as for an endpoint with nothing mismatched, while the endpoint
// meant went on holding its commands back. It fails, exit 1, saying the
// database knows no such endpoint, and fails nothing; the endpoint meant,
// by its URL or its ref, with nothing mismatched, is "failed: 0", exit 0.
func TestFailMismatchedOfAnEndpointTheDatabaseDoesNotKnowFails(t *testing.T) {
	t.Parallel()
	db, _ := migrated(t)
	const hook, typo = "https://source.example/commands", "https://source.example/command"
	mustRun(t, exitOK, "contracts", "pin", "-db", db, hook, strings.Repeat("a", 64))
	code, out, errOut := courierRun(t, "contracts", "fail-mismatched", "-db", db, typo)
	if code != exitFailed || out != "" || !strings.Contains(errOut, "no endpoint the database knows is https://source.example/… (ref "+endpoint.Ref(typo)+")") {
		t.Errorf("fail-mismatched of a URL the database does not know: exit %d, %q, stderr %q; want %d saying so", code, out, errOut, exitFailed)
	}
	for _, arg := range []string{hook, endpoint.Ref(hook)} {
		if out := mustRun(t, exitOK, "contracts", "fail-mismatched", "-db", db, arg); out != "failed: 0\n" {
			t.Errorf("fail-mismatched %s: %q, want failed: 0", arg, out)
		}
	}
}
