package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/courier-go/courier"
)

// TestAdminActsOnTheBodyAuthorizeRead: an Authorize that reads the body
// to decide (r.FormValue, r.ParseForm, a JSON decoder: whether the caller
// may redrive this delivery) drained it, and the action read what was
// left. With a Content-Length the action refused the short body (400);
// without one (chunked) it read an empty form, and a redrive of the one
// delivery Authorize allowed redrove every failed delivery of every
// endpoint. The action now reads the body whole, whatever Authorize read
// of it: the one delivery is redriven, the other stays failed.
func TestAdminActsOnTheBodyAuthorizeRead(t *testing.T) {
	t.Parallel()
	chunked := func(r *http.Request) { r.ContentLength = -1 } // no Content-Length to tell a drained body by
	for _, tc := range []struct {
		name      string
		authorize func(r *http.Request) (int64, error)
		path      func(id int64) (string, string)
		edit      func(*http.Request)
		status    int
	}{
		{"form", formID, formRedrive, nil, http.StatusSeeOther},
		{"chunked form", formID, formRedrive, chunked, http.StatusSeeOther},
		{"json", jsonRef, jsonRedrive, nil, http.StatusOK},
		{"chunked json", jsonRef, jsonRedrive, chunked, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var allowed int64
			b := setupAdmin(t, func(r *http.Request) error {
				if id, err := tc.authorize(r); err != nil || id != allowed {
					return fmt.Errorf("%w: not this caller's", courier.CodeForbidden)
				}
				return nil
			})
			mine := b.failed(t, "n-1", hookA)
			theirs := b.failed(t, "n-2", hookB)
			allowed = mine
			p, body := tc.path(mine)
			resp, out := b.do(t, http.MethodPost, p, body, tc.edit)
			if resp.StatusCode != tc.status {
				t.Fatalf("the redrive Authorize allowed: %d %s, want %d", resp.StatusCode, out, tc.status)
			}
			if m, o := b.status(t, mine), b.status(t, theirs); m != courier.StatusPending || o != courier.StatusFailed {
				t.Fatalf("after a redrive of delivery %d only: it is %s, the other %s (want pending, failed)", mine, m, o)
			}
		})
	}
}

// formID is the id field of a form, as an Authorize reads it.
func formID(r *http.Request) (int64, error) { return strconv.ParseInt(r.FormValue("id"), 10, 64) }

func formRedrive(id int64) (string, string) { return "/ops/redrive", "id=" + strconv.FormatInt(id, 10) }

// jsonRef reads a redrive's JSON body as an Authorize would, and allows
// hookA's ref as the delivery the test allows (1, the first enqueued).
func jsonRef(r *http.Request) (int64, error) {
	var req struct {
		EndpointRef string `json:"endpoint_ref"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<10)).Decode(&req); err != nil || req.EndpointRef != refA {
		return 0, err
	}
	return 1, nil
}

func jsonRedrive(int64) (string, string) { return "/api/redrive", `{"endpoint_ref":"` + refA + `"}` }

// TestAdminMutationReadsNoQuery: a mutation reads its body and path, never
// its query, but an Authorize that reads the form (r.FormValue) reads the
// query too: a redrive whose id was in the query passed an Authorize that
// allowed that id, and the action, finding no id in the body, redrove
// every failed delivery of every endpoint; an endpoint_ref in the query
// passed for the endpoint the body's did not name. A mutation with a query
// is now 400 validation_failed naming each parameter (rule query), and
// nothing changes.
func TestAdminMutationReadsNoQuery(t *testing.T) {
	t.Parallel()
	var allowed int64
	b := setupAdmin(t, func(r *http.Request) error {
		if id, err := formID(r); err != nil || id != allowed {
			return fmt.Errorf("%w: not this caller's", courier.CodeForbidden)
		}
		return nil
	})
	mine := b.failed(t, "n-1", hookA)
	theirs := b.failed(t, "n-2", hookB)
	allowed = mine
	id := strconv.FormatInt(mine, 10)
	for _, m := range []struct{ path, body string }{
		{"/ops/redrive?id=" + id, ""},
		{"/ops/redrive?id=" + id, "endpoint_ref=" + refB},
		{"/api/redrive?id=" + id, "{}"},
		{"/api/deliveries/" + strconv.FormatInt(theirs, 10) + "/redrive?id=" + id, ""},
	} {
		resp, out := b.do(t, http.MethodPost, m.path, m.body, func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") })
		if m.body == "{}" {
			resp, out = b.do(t, http.MethodPost, m.path, m.body, nil)
		}
		p := refused(t, resp, out, http.StatusBadRequest, courier.CodeValidation)
		if len(p.Errors) != 1 || p.Errors[0]["field"] != "id" || p.Errors[0]["rule"] != "query" {
			t.Fatalf("POST %s: %s, want the field id, rule query", m.path, out)
		}
		if st, other := b.status(t, mine), b.status(t, theirs); st != courier.StatusFailed || other != courier.StatusFailed {
			t.Fatalf("POST %s changed something: the deliveries are %s and %s", m.path, st, other)
		}
	}
}

// TestAdminAuthorizeReadsABoundedBody: an Authorize may read the body to
// decide, and it is asked before anyone is known, so what it can read is
// what anyone can send: before, the whole body, however large (r.FormValue
// on a multipart body holds 32 MiB in memory and writes the rest to
// temporary files), although no change takes a body over maxBody. It now
// reads at most maxBody+1 bytes, then the end of the body, and the action
// refuses the body as too large (413), sized or chunked; nothing changes.
func TestAdminAuthorizeReadsABoundedBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(*http.Request)
	}{
		{"sized", nil},
		{"chunked", func(r *http.Request) { r.ContentLength = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var read atomic.Int64
			b := setupAdmin(t, func(r *http.Request) error {
				n, err := io.Copy(io.Discard, r.Body)
				read.Store(n)
				return err
			})
			failed := b.failed(t, "n-1", hookA)
			body := "id=" + strconv.FormatInt(failed, 10) + "&pad=" + strings.Repeat("x", 1<<20)
			resp, out := b.do(t, http.MethodPost, "/ops/redrive", body, tc.edit)
			if n := read.Load(); n > maxBody+1 {
				t.Errorf("Authorize read %d bytes of the body, want at most %d", n, maxBody+1)
			}
			refused(t, resp, out, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)
			if st := b.status(t, failed); st != courier.StatusFailed {
				t.Fatalf("a refused redrive acted: %s", st)
			}
		})
	}
}
