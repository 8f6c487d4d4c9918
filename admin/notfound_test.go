package admin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/courier-go/courier"
)

// TestNotFoundSaysWhy: every 404 about a delivery id says which it is. An
// id that names no delivery, in the path's syntax or not, is "no such
// delivery" whatever the action; a delivery a cancel or a redrive does not
// take is named by its status, so that an operator can tell the two apart
// as the command line does.
func TestNotFoundSaysWhy(t *testing.T) {
	t.Parallel()
	b := setupAdminConfig(t, Config{Authorize: allowAll})
	pending := strconv.FormatInt(b.enqueue(t, "n-pending", hookA), 10)
	cancelled := strconv.FormatInt(b.enqueue(t, "n-cancelled", hookA), 10)
	b.do(t, "POST", "/api/deliveries/"+cancelled+"/cancel", "", nil)
	for _, tc := range []struct{ method, path, detail string }{
		{"GET", "/api/deliveries/999", "no such delivery"},
		{"GET", "/api/deliveries/abc", "no such delivery"},
		{"POST", "/api/deliveries/999/redrive", "no such delivery"},
		{"POST", "/api/deliveries/-1/redrive", "no such delivery"},
		{"POST", "/api/deliveries/999/cancel", "no such delivery"},
		{"POST", "/api/deliveries/" + pending + "/redrive", "no delivery with this id that can be redriven: failed, or quarantined payload_unreadable (it is pending)"},
		{"POST", "/api/deliveries/" + cancelled + "/cancel", "no delivery with this id that can be cancelled: pending, retrying, failed or quarantined (it is suppressed)"},
	} {
		resp, body := b.do(t, tc.method, tc.path, "", nil)
		refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
		var p struct{ Detail string }
		if err := json.Unmarshal(body, &p); err != nil || p.Detail != tc.detail {
			t.Errorf("%s %s: detail %q, want %q", tc.method, tc.path, p.Detail, tc.detail)
		}
	}
}
