package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
)

// TestPublishRefusesAHostSpelledOtherThanItIsDialed: a policy refusing
// https://attacker.example/capture was given the endpoint as requested,
// its host in lower case, and allowed the same receiver spelled in
// full-width letters, with a Kelvin sign, percent-encoded, or with a
// trailing root dot: net/http dials each of those as attacker.example, so
// the payload was signed and sent where the policy refused it. Such an
// endpoint is now 400 validation_failed naming endpoint (rule host),
// before Authorize sees it, and nothing is stored; the ASCII spelling is
// still refused by the policy, and an internationalized name is taken in
// its A-label form.
func TestPublishRefusesAHostSpelledOtherThanItIsDialed(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	s, srv := setupPublishWith(t, handler.PublishConfig{Authorize: func(_ context.Context, _ signature.Principal, target handler.PublishTarget) error {
		asked.Add(1)
		if target.Endpoint == "https://attacker.example/capture" {
			return errors.New("not this one")
		}
		return nil
	}})
	direct := func(id, endpoint string) string {
		b, _ := json.Marshal(map[string]any{"notification_id": id, "endpoint": endpoint, "payload": map[string]string{"grant": "admin"}})
		return string(b)
	}
	for _, url := range []string{
		"https://ａｔｔａｃｋｅｒ.example/capture",
		"https://attac\u212aer.example/capture",
		"https://%EF%BD%81ttacker.example/capture",
		"https://attacker.example./capture",
		"https://ATTACKER.EXAMPLE.:443/capture",
	} {
		status, out := publish(t, srv, direct("n-1", url), "", publishToken)
		var p problemFields
		if err := json.Unmarshal(out, &p); err != nil || status != http.StatusBadRequest || p.Code != courier.CodeValidation ||
			len(p.Errors) != 1 || p.Errors[0].Field != "endpoint" || p.Errors[0].Rule != "host" {
			t.Errorf("%s: %d %s, want 400 validation_failed naming endpoint, rule host", url, status, out)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("Authorize was asked about %d requests that were refused", n)
	}
	if outbox, inbox := stored(t, s); outbox != 0 || inbox != 0 {
		t.Fatalf("refused publishes stored %d deliveries and %d idempotency records", outbox, inbox)
	}
	if status, out := publish(t, srv, direct("n-2", "https://attacker.example/capture"), "", publishToken); status != http.StatusForbidden {
		t.Errorf("the refused endpoint in ASCII: %d %s, want 403", status, out)
	}
	if status, out := publish(t, srv, direct("n-3", "https://xn--bcher-kva.example/hook"), "", publishToken); status != http.StatusAccepted {
		t.Errorf("an A-label host: %d %s, want 202", status, out)
	}
}
