package main

import (
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/endpoint"
)

// TestAChangedContractIsFoundFromTheCLI: courier health said "blocked
// (contract_changed)" and nothing else: no count of the deliveries held
// back, and no action that names the endpoint holding them, which pin and
// fail-mismatched need (only the admin page showed it). health now counts
// them, and contracts list shows the pins, those holding deliveries back
// first, each by its ref with its redacted URL.
func TestAChangedContractIsFoundFromTheCLI(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	const source = "https://ops:hunter2@source.example/commands?token=s3cret"
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	enqueueCommand(t, s, source, "r-1", a)
	if err := s.Contracts.Pin(t.Context(), source, b); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := courierRun(t, "health", "-db", db)
	if code != exitBlocked || !strings.Contains(out, "(contract_changed)") || !strings.Contains(out, "contract mismatches: 1\n") {
		t.Errorf("health: exit %d, %q, %q; want blocked, counting the delivery held back", code, out, errOut)
	}
	code, out, errOut = courierRun(t, "contracts", "list", "-db", db)
	if code != exitOK || !strings.Contains(out, endpoint.Ref(source)) || !strings.Contains(out, b) || !strings.Contains(out, "https://source.example/…") {
		t.Fatalf("contracts list: exit %d, %q, %q; want the pin by its ref, redacted", code, out, errOut)
	}
	for _, secret := range []string{"hunter2", "s3cret", "ops:"} {
		if strings.Contains(out+errOut, secret) {
			t.Fatalf("contracts list shows the endpoint's credentials: %q %q", out, errOut)
		}
	}
	if fields := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1]); fields[len(fields)-1] != "1" {
		t.Errorf("contracts list: %q; want its MISMATCHED column at 1", out)
	}
}
