package handler_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

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
	refusesEndpoints(t, s, srv, &asked, "host",
		"https://ａｔｔａｃｋｅｒ.example/capture",
		"https://attac\u212aer.example/capture",
		"https://%EF%BD%81ttacker.example/capture",
		"https://attacker.example./capture",
		"https://ATTACKER.EXAMPLE.:443/capture",
	)
	if status, out := publish(t, srv, direct("n-2", "https://attacker.example/capture"), "", publishToken); status != http.StatusForbidden {
		t.Errorf("the refused endpoint in ASCII: %d %s, want 403", status, out)
	}
	if status, out := publish(t, srv, direct("n-3", "https://xn--bcher-kva.example/hook"), "", publishToken); status != http.StatusAccepted {
		t.Errorf("an A-label host: %d %s, want 202", status, out)
	}
}
