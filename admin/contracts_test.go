package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
)

// sourceHook is a source endpoint whose URL carries credentials, which no
// answer may show.
const sourceHook = "https://ops:hunter2@source.example/commands?token=s3cret"

var (
	digestA = strings.Repeat("a", 64)
	digestB = strings.Repeat("b", 64)
	refS    = endpoint.Ref(sourceHook)
)

// enqueueCommand enqueues a change command built for the contract digest.
func (b *adminBundle) enqueueCommand(t *testing.T, requestID, digest string) int64 {
	t.Helper()
	c, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: requestID, SourceMaxAttempts: 5, CapabilitiesSHA256: digest, Body: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := c.Payload()
	if err != nil {
		t.Fatal(err)
	}
	e, err := b.store.Outbox.EnqueueCommand(t.Context(), b.store.DB(), store.CommandParams{Endpoint: sourceHook, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// noSecrets fails when an answer shows the source endpoint's credentials.
func noSecrets(t *testing.T, what string, body []byte) {
	t.Helper()
	for _, secret := range []string{"hunter2", "s3cret", "ops:"} {
		if strings.Contains(string(body), secret) {
			t.Fatalf("%s shows the endpoint's credentials: %s", what, body)
		}
	}
}

// TestAdminResolvesAChangedContract: an endpoint held back by a changed
// contract shows in the health (JSON and page) and the contracts list,
// named by its ref, its URL redacted; Contracts.Pin and FailMismatched
// are reachable from the API and the page, authorized like every other
// mutation, and never answer with a full URL.
func TestAdminResolvesAChangedContract(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	cmd := b.enqueueCommand(t, "r1", digestA)
	if err := b.store.Contracts.Pin(t.Context(), sourceHook, digestB); err != nil {
		t.Fatal(err)
	}

	resp, raw := b.do(t, "GET", "/api/health", "", nil)
	noSecrets(t, "the health", raw)
	var h healthJSON
	if err := json.Unmarshal(raw, &h); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %d %s", resp.StatusCode, raw)
	}
	if h.Code != courier.CodeContractChanged || h.ContractMismatches != 1 || h.Operations["change"][courier.StatusPending] != 1 || len(h.Operations) != 3 {
		t.Fatalf("health = %+v, want contract_changed, 1 mismatch, 1 pending change", h)
	}
	_, raw = b.do(t, "GET", "/api/contracts", "", nil)
	noSecrets(t, "the contracts", raw)
	var list contractPageJSON
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Contracts) != 1 {
		t.Fatalf("contracts: %s", raw)
	}
	if k := list.Contracts[0]; k.Ref != refS || k.Endpoint != "https://source.example/…" || k.CapabilitiesSHA256 != digestB || k.Mismatched != 1 {
		t.Fatalf("contract = %+v", k)
	}
	_, raw = b.do(t, "GET", "/", "", nil)
	page := string(raw)
	noSecrets(t, "the ops page", raw)
	for _, want := range []string{
		`<span id="contract-mismatches">1</span>`, "contract_changed", `id="operations"`,
		`action="./ops/contracts/fail-mismatched"><input type="hidden" name="endpoint_ref" value="` + refS + `"><button>Fail held-back deliveries</button>`,
		`action="./ops/contracts/pin"><input type="hidden" name="endpoint_ref" value="` + refS + `">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the ops page lacks %s", want)
		}
	}

	// Refusals: bad digest, unknown or malformed ref, wrong method.
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               courier.Code
	}{
		{"POST", "/api/contracts/" + refS + "/pin", `{"capabilities_sha256":"ABC"}`, 400, courier.CodeValidation},
		{"POST", "/api/contracts/" + refS + "/pin", `{"capabilities_sha256":"` + digestA + `","extra":1}`, 400, courier.CodeValidation},
		{"POST", "/api/contracts/" + refS + "/pin", `{}`, 400, courier.CodeValidation},
		{"POST", "/api/contracts/" + endpoint.Ref("https://unknown.example/") + "/pin", `{"capabilities_sha256":"` + digestA + `"}`, 404, courier.CodeNotFound},
		{"POST", "/api/contracts/not-a-ref/fail-mismatched", "", 404, courier.CodeNotFound},
		{"GET", "/api/contracts/" + refS + "/fail-mismatched", "", 405, courier.CodeMethodNotAllowed},
		{"POST", "/ops/contracts/pin", "endpoint_ref=" + refS + "&capabilities_sha256=x", 400, courier.CodeValidation},
		{"POST", "/ops/contracts/fail-mismatched", "endpoint_ref=x", 400, courier.CodeValidation},
	} {
		resp, body := b.do(t, tc.method, tc.path, tc.body, nil)
		refused(t, resp, body, tc.status, tc.code)
	}
	if k, _ := b.store.Contracts.Get(t.Context(), sourceHook); k.CapabilitiesSHA256 != digestB {
		t.Fatalf("a refused pin changed the contract: %+v", k)
	}

	// Pinning the old digest again resumes the endpoint.
	resp, raw = b.do(t, "POST", "/api/contracts/"+refS+"/pin", `{"capabilities_sha256":"`+digestA+`"}`, nil)
	noSecrets(t, "the pin's answer", raw)
	var k contractJSON
	if err := json.Unmarshal(raw, &k); err != nil || resp.StatusCode != http.StatusOK || k.CapabilitiesSHA256 != digestA || k.Mismatched != 0 || k.Ref != refS {
		t.Fatalf("pin: %d %s", resp.StatusCode, raw)
	}
	if h := adminOK[healthJSON](t, b, "GET", "/api/health", ""); h.ContractMismatches != 0 || h.Status != store.HealthOK {
		t.Fatalf("health after re-pinning = %+v", h)
	}

	// Re-pinned to b from the page; then the held-back command is failed
	// from the API.
	resp, _ = b.do(t, "POST", "/ops/contracts/pin", "endpoint_ref="+refS+"&capabilities_sha256="+digestB, nil)
	if page := b.follow(t, resp); !strings.Contains(page, "Contract pinned.") {
		t.Fatalf("after pin: %s", page)
	}
	if n := adminOK[failedJSON](t, b, "POST", "/api/contracts/"+refS+"/fail-mismatched", ""); n.Failed != 1 {
		t.Fatalf("fail-mismatched = %+v, want 1", n)
	}
	if st := b.status(t, cmd); st != courier.StatusFailed {
		t.Fatalf("the held-back command is %s, want failed", st)
	}
	if h := adminOK[healthJSON](t, b, "GET", "/api/health", ""); h.ContractMismatches != 0 || h.Code != courier.CodeFailedPresent {
		t.Fatalf("health after fail-mismatched = %+v", h)
	}

	// From the page: another held-back command, failed by the form.
	b.enqueueCommand(t, "r2", digestB)
	if err := b.store.Contracts.Pin(t.Context(), sourceHook, digestA); err != nil {
		t.Fatal(err)
	}
	resp, _ = b.do(t, "POST", "/ops/contracts/fail-mismatched", "endpoint_ref="+refS, nil)
	if page := b.follow(t, resp); !strings.Contains(page, "Failed 1 delivery held back by its contract.") {
		t.Fatalf("after the form's fail-mismatched: %s", page)
	}
}
