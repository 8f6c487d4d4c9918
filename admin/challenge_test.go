package admin

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/courier-go/courier"
)

// TestAdminAuthorizeRefusalIsNeverAChallengelessUnauthorized: a 401 must
// carry a WWW-Authenticate challenge (RFC 9110 11.6.1), and the Handler
// has none to give: it knows no scheme, the application's authentication
// in front of it does. An Authorize error that is not CodeForbidden (no
// session, a credential it could not check) answers 403 with code
// unauthorized, so that a tool still tells "who are you?" from "not you",
// and a CodeForbidden one 403 forbidden as before. Before, the first
// answered 401 unauthorized without a challenge.
func TestAdminAuthorizeRefusalIsNeverAChallengelessUnauthorized(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		code courier.Code
	}{
		{"no session", errors.New("no session"), courier.CodeUnauthorized},
		{"unauthorized", fmt.Errorf("session expired: %w", courier.CodeUnauthorized), courier.CodeUnauthorized},
		{"forbidden", fmt.Errorf("viewer role: %w", courier.CodeForbidden), courier.CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupAdmin(t, func(*http.Request) error { return tc.err })
			failed := b.failed(t, "n-1", hookA)
			pending := b.enqueue(t, "n-2", hookA)
			for _, m := range mutations(failed, pending) {
				resp, body := b.do(t, m.method, m.path, m.body, nil)
				if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: 401 without WWW-Authenticate: %s", m.method, m.path, body)
					continue
				}
				refused(t, resp, body, http.StatusForbidden, tc.code)
			}
			if f, p := b.status(t, failed), b.status(t, pending); f != courier.StatusFailed || p != courier.StatusPending {
				t.Fatalf("a refused change acted: the failed delivery is %s, the pending one %s", f, p)
			}
		})
	}
}
