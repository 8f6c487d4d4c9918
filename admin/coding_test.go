package admin

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestAdminRefusesAContentCodedFormOrEmptyBody: every change refuses a body
// under a content coding alike, 415 unsupported_media_type with
// Accept-Encoding: identity, and acts on nothing, whatever the body reads
// as: a form's compressed bytes, and an empty body, which no coding
// makes (gzip of nothing is 20 bytes). Before, only a JSON body that was not empty was refused:
// the form posts parsed the compressed bytes as a form (400 for the
// gzip header read as a field), and an empty body with Content-Encoding:
// gzip was taken as no fields, which for a redrive is every failed
// delivery of every endpoint.
func TestAdminRefusesAContentCodedFormOrEmptyBody(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-1", hookA)
	pending := b.enqueue(t, "n-2", hookB)
	var requests []struct{ method, path, body string }
	for _, m := range mutations(failed, pending) {
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		if _, err := zw.Write([]byte(m.body)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		requests = append(requests, struct{ method, path, body string }{m.method, m.path, zipped.String()})
	}
	for _, m := range append(requests, []struct{ method, path, body string }{
		{"POST", "/ops/redrive", ""},
		{"POST", "/api/redrive", ""},
	}...) {
		resp, out := b.do(t, m.method, m.path, m.body, func(r *http.Request) {
			r.Header.Set("Content-Encoding", "gzip")
			if strings.HasPrefix(m.path, "/ops/") {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			} else {
				r.Header.Set("Content-Type", "application/json")
			}
		})
		if resp.StatusCode != http.StatusUnsupportedMediaType || resp.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("%s %s (%d bytes under gzip): %d Accept-Encoding %q %s, want 415 identity", m.method, m.path, len(m.body),
				resp.StatusCode, resp.Header.Get("Accept-Encoding"), out)
			continue
		}
		refused(t, resp, out, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType)
	}
	if f, p := b.status(t, failed), b.status(t, pending); f != courier.StatusFailed || p != courier.StatusPending {
		t.Fatalf("a refused change acted: the failed delivery is %s, the pending one %s", f, p)
	}
	if h, _ := b.store.Endpoints.Get(t.Context(), hookA); h.State != store.EndpointClosed || h.Limits != (store.Limits{}) {
		t.Fatalf("a refused change acted on the endpoint: %+v", h)
	}
}
