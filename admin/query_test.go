package admin

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/courier-go/courier"
)

// TestAPIListsRefuseAParameterTheyDoNotRead: a list of the JSON API reads
// its query as strictly as a form: a parameter it does not read is 400
// validation_failed naming it (rule unknown), beside any given twice
// (rule single). A filter misspelled (?stat=failed), or named as the
// command line names it (?endpoint=…), would otherwise list every
// delivery as if it had been applied. The parameters it reads still
// filter.
func TestAPIListsRefuseAParameterTheyDoNotRead(t *testing.T) {
	t.Parallel()
	b := setupAdminConfig(t, Config{Authorize: allowAll})
	b.failed(t, "n-failed", hookA)
	b.enqueue(t, "n-pending", hookB)
	for _, tc := range []struct {
		path  string
		wants []string // field:rule, in order
	}{
		{"/api/deliveries?stat=failed", []string{"stat:unknown"}},
		{"/api/deliveries?endpoint=" + url.QueryEscape(hookA), []string{"endpoint:unknown"}},
		{"/api/deliveries?status=failed&status=pending&zzz=1&limit=1", []string{"status:single", "zzz:unknown"}},
		{"/api/endpoints?limt=1", []string{"limt:unknown"}},
		{"/api/contracts?page=2", []string{"page:unknown"}},
	} {
		resp, body := b.do(t, "GET", tc.path, "", nil)
		p := refused(t, resp, body, 400, courier.CodeValidation)
		var got []string
		for _, e := range p.Errors {
			got = append(got, e["field"]+":"+e["rule"])
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.wants) {
			t.Errorf("GET %s: errors %v, want %v", tc.path, got, tc.wants)
		}
	}
	if page := adminOK[deliveryPageJSON](t, b, "GET", "/api/deliveries?status=failed&limit=5", ""); len(page.Deliveries) != 1 || page.Deliveries[0].NotificationID != "n-failed" {
		t.Errorf("?status=failed&limit=5 listed %+v, want n-failed alone", page.Deliveries)
	}
}
