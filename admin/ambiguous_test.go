package admin

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestAdminFormNamingTwoEndpointsIsRefused: the endpoint forms take an
// endpoint_ref (the page's buttons) or an endpoint (a URL an operator
// typed), and a form with both acted on the ref's endpoint, the typed one
// left unread: an operator (or a tool, or a policy in front that read the
// typed URL) who meant one endpoint had another enabled or disabled. A
// form naming both is now 400 validation_failed naming endpoint (rule
// excluded_with), and neither endpoint is touched.
func TestAdminFormNamingTwoEndpointsIsRefused(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	b.enqueue(t, "n-1", hookA)
	b.enqueue(t, "n-2", hookB)
	for _, action := range []string{"disable", "enable"} {
		form := url.Values{"endpoint_ref": {refA}, "endpoint": {hookB}}.Encode()
		resp, body := b.do(t, http.MethodPost, "/ops/endpoints/"+action, form, nil)
		p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
		if len(p.Errors) != 1 || p.Errors[0]["field"] != "endpoint" || p.Errors[0]["rule"] != "excluded_with" {
			t.Fatalf("%s with both: %s, want the field endpoint, rule excluded_with", action, body)
		}
		for _, hook := range []string{hookA, hookB} {
			if h, _ := b.store.Endpoints.Get(t.Context(), hook); h.State != store.EndpointClosed {
				t.Fatalf("%s with both left an endpoint %s", action, h.State)
			}
		}
	}
}
