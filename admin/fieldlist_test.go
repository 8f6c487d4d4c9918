package admin

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/courier-go/courier"
)

// TestAdminRefusalNamesBoundedFields: a JSON body of 1,500 unknown members,
// a query of 300 parameters on a change, and an ops form of 1,500 unknown
// fields are each refused 400 validation_failed naming the first 100, in
// one order, in an answer that stays small, and nothing is redriven.
func TestAdminRefusalNamesBoundedFields(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-1", hookA)
	var members, query, form []string
	for i := range 1500 {
		members = append(members, fmt.Sprintf(`"u%d":1`, i))
		form = append(form, fmt.Sprintf("u%d=1", i))
		if i < 300 {
			query = append(query, fmt.Sprintf("q%d=1", i))
		}
	}
	for _, tc := range []struct {
		name, path, body, contentType string
		first                         string
	}{
		{"JSON body", "/api/redrive", "{" + strings.Join(members, ",") + "}", "application/json", "u0"},
		{"query on a change", "/api/redrive?" + strings.Join(query, "&"), `{}`, "application/json", "q0"},
		{"ops form", "/ops/redrive", strings.Join(form, "&"), "application/x-www-form-urlencoded", "u0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first []byte
			for range 2 {
				resp, body := b.do(t, "POST", tc.path, tc.body, func(r *http.Request) { r.Header.Set("Content-Type", tc.contentType) })
				p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
				if len(body) > 100*(256+64)+512 || len(p.Errors) != 100 || p.Errors[0]["field"] != tc.first {
					t.Fatalf("%d-byte answer naming %d fields, first %v: %.300s", len(body), len(p.Errors), p.Errors[:min(1, len(p.Errors))], body)
				}
				if first != nil && string(first) != string(body) {
					t.Fatalf("the same request answered\n%.300s\nthen\n%.300s", first, body)
				}
				first = body
			}
		})
	}
	if st := b.status(t, failed); st != courier.StatusFailed {
		t.Fatalf("a refused request acted: %s", st)
	}
}
