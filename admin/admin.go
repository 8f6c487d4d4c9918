package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/jsonbody"
	"github.com/courier-go/courier/internal/logdefault"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/store"
)

// maxBody bounds the body of a mutation (JSON or form).
const maxBody = 16 << 10

// Config configures a Handler.
type Config struct {
	// Store is the outbox the Handler reports on and acts on. Required.
	Store *store.Store
	// Authorize decides whether r may change anything: redrive, cancel,
	// enable or disable an endpoint, set its limits, pin a contract or fail the
	// deliveries a changed contract holds back. It returns nil to allow.
	// Any error answers 403: one whose code is courier.CodeForbidden
	// (return courier.CodeForbidden, or wrap it) with code forbidden, the
	// caller is known but may not act; any other with code unauthorized,
	// the caller is not known (no session, say). Never 401: a 401 carries
	// a WWW-Authenticate challenge, and the Handler knows no scheme to
	// offer; the application's authentication in front of it does, and
	// answers its own 401 with its challenge before the Handler is
	// reached. Defaults to nil: the Handler is read-only and every
	// mutation answers 403 forbidden.
	//
	// It may read r's body to decide (r.FormValue, a JSON decoder): the
	// action reads the body whole after it, whatever it read. It reads at
	// most the first 16 KiB and one byte, then the body's end: no change
	// takes a longer body, and the action refuses one (413).
	//
	// Reads are not authorized here: mount the Handler behind the
	// application's own authentication. The Handler knows no tenants:
	// every reader sees, and every change Authorize allows may act on, the
	// deliveries and endpoints of every tenant of the Store (a redrive
	// without an id or endpoint_ref takes every endpoint's). A view or a
	// control for one tenant is the application's to build (store.Outbox.List
	// by endpoint, store.Subscriptions.List), or its Authorize's to narrow
	// by what the request names.
	Authorize func(r *http.Request) error
	// Logger receives one line per mutation, refusal of a mutation and
	// store failure, and one at Info for a request its client ended
	// before the database answered; never payloads, endpoint URLs or
	// credentials.
	// A line names the action and what it acted on, not who asked: the
	// Handler knows no caller. For an audit trail, log the caller in
	// Authorize, which sees every mutation first, or give a Logger whose
	// handler reads the caller from the context each line is logged with
	// (the request's). Without one, the Handler logs through
	// slog.Default(), its Warn and Error lines only (a store failure);
	// pass slog.New(slog.DiscardHandler) for none.
	Logger *slog.Logger
}

// withDefaults returns a copy of c with every unset field at its default.
func (c Config) withDefaults() Config {
	c.Logger = logdefault.Or(c.Logger)
	return c
}

func (c Config) validate() error {
	if c.Store == nil {
		return configError("Config.Store is required")
	}
	return nil
}

func configError(msg string) error {
	return &coded.Error{Code: courier.CodeConfigInvalid, Msg: "admin: " + msg}
}

// Handler is the ops page and JSON API over one outbox; see the package
// documentation for its routes.
type Handler struct {
	cfg   Config
	reads time.Duration // a read's bound, readTimeout
	mux   *http.ServeMux
	cop   http.CrossOriginProtection
	pages *template.Template
}

// NewHandler returns a Handler over cfg.Store.
func NewHandler(cfg Config) (*Handler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pages, err := templates()
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, reads: readTimeout, mux: http.NewServeMux(), pages: pages}
	endpoints := h.cfg.Store.Endpoints
	routes := []struct {
		pattern string
		h       http.Handler
	}{
		{"/api/health", h.read(h.apiHealth)},
		{"/api/deliveries", h.read(h.apiList)},
		{"/api/deliveries/{id}", h.read(h.apiGet)},
		{"/api/deliveries/{id}/redrive", h.mutate(h.apiRedriveOne)},
		{"/api/deliveries/{id}/cancel", h.mutate(h.apiCancel)},
		{"/api/redrive", h.mutate(h.apiRedrive)},
		{"/api/cancel", h.mutate(h.apiCancelEndpoint)},
		{"/api/endpoints", h.read(h.apiEndpoints)},
		{"/api/endpoints/{ref}/enable", h.mutate(h.apiEndpoint(actEnable, endpoints.Enable))},
		{"/api/endpoints/{ref}/disable", h.mutate(h.apiEndpoint(actDisable, endpoints.Disable))},
		{"/api/endpoints/{ref}/limits", h.mutate(h.apiLimits)},
		{"/api/endpoints/{ref}/blocked-keys", h.read(h.apiBlockedKeys)},
		{"/api/contracts", h.read(h.apiContracts)},
		{"/api/contracts/{ref}/pin", h.mutate(h.apiPin)},
		{"/api/contracts/{ref}/fail-mismatched", h.mutate(h.apiFailMismatched)},
		{"/{$}", h.read(h.pageIndex)},
		{"/deliveries", h.read(h.pageSearch)},
		{"/deliveries/{id}", h.read(h.pageDelivery)},
		{"/ops/redrive", h.mutate(h.opsRedrive)},
		{"/ops/cancel", h.mutate(h.opsCancel)},
		{"/ops/endpoints/enable", h.mutate(h.opsEndpoint(actEnable, endpoints.Enable))},
		{"/ops/endpoints/disable", h.mutate(h.opsEndpoint(actDisable, endpoints.Disable))},
		{"/ops/contracts/pin", h.mutate(h.opsPin)},
		{"/ops/contracts/fail-mismatched", h.mutate(h.opsFailMismatched)},
		{"/", http.HandlerFunc(h.noSuchPage)},
	}
	for _, r := range routes {
		h.mux.Handle(r.pattern, r.h)
	}
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		// A read waits for a database that stopped answering no longer
		// than h.reads: its page is worth nothing later, and an
		// operator's health probe needs its answer.
		ctx, cancel := context.WithTimeout(r.Context(), h.reads)
		defer cancel()
		r = r.WithContext(ctx)
	}
	switch {
	case r.URL.Path == "" && !strings.HasSuffix(requestPath(r), "/"):
		h.mountPoint(w, r)
	case !strings.HasPrefix(r.URL.Path, "/"):
		// http.StripPrefix was given the prefix with its trailing slash
		// ("/ops/courier/"), and took the path's leading one with it: the
		// path is the same page's, relative to the same mount point.
		r2 := new(http.Request)
		*r2 = *r
		r2.URL = new(url.URL)
		*r2.URL = *r.URL
		r2.URL.Path = "/" + r.URL.Path
		if r.URL.RawPath != "" {
			r2.URL.RawPath = "/" + r.URL.RawPath
		}
		h.mux.ServeHTTP(w, r2)
	default:
		h.mux.ServeHTTP(w, r)
	}
}

// readTimeout bounds a read's wait for the database (see ServeHTTP). A
// mutation is not bounded: it ends with its request, having done what it
// did (see doneBefore).
const readTimeout = 10 * time.Second

// requestPath is the path the client asked for, before any prefix was
// stripped, "" if the request does not say.
func requestPath(r *http.Request) string {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return ""
	}
	return u.EscapedPath()
}

// mountPoint answers a request for the mount point without its slash
// (http.StripPrefix leaves the path ""): it sends the browser to the
// slashed form, so that relative links resolve under it.
func (h *Handler) mountPoint(w http.ResponseWriter, r *http.Request) {
	if base := path.Base(requestPath(r)); base != "/" && base != "." {
		w.Header().Set("Location", "./"+base+"/")
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	problem.Error(w, http.StatusNotFound, courier.CodeNotFound, "no such page")
}

// noSuchPage answers a path the Admin has no page for. When the end of
// the path, after one of its first few segments, is one of its pages, the
// Admin was likely handed the path with the prefix it is mounted under
// still on it, and the answer says how to mount it. (A mount prefix is a
// few segments: a path of thousands is not looked up thousands of times.)
func (h *Handler) noSuchPage(w http.ResponseWriter, r *http.Request) {
	const prefixSegments = 8
	p := r.URL.Path
	for i, seen := 1, 0; i < len(p) && seen < prefixSegments; i++ {
		if p[i] != '/' {
			continue
		}
		seen++
		r2 := new(http.Request)
		*r2 = *r
		r2.URL = &url.URL{Path: p[i:]}
		if _, pattern := h.mux.Handler(r2); pattern != "/" {
			problem.Error(w, http.StatusNotFound, courier.CodeNotFound,
				"no such page; if the handler is mounted under a prefix, mount it with http.StripPrefix (see package admin)")
			return
		}
	}
	problem.Error(w, http.StatusNotFound, courier.CodeNotFound, "no such page")
}

// read admits GET and HEAD.
func (h *Handler) read(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			problem.Error(w, http.StatusMethodNotAllowed, courier.CodeMethodNotAllowed, "use GET")
			return
		}
		next(w, r)
	})
}

// mutate admits a POST from the same site, without a query and without a
// content coding, that Authorize allows.
func (h *Handler) mutate(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			problem.Error(w, http.StatusMethodNotAllowed, courier.CodeMethodNotAllowed, "use POST")
			return
		}
		if err := h.cop.Check(r); err != nil {
			h.refuse(w, r, http.StatusForbidden, courier.CodeForbidden, "cross-origin request refused")
			return
		}
		if q := r.URL.Query(); len(q) > 0 {
			// A mutation reads its path and body only: a query would be
			// read by an Authorize that reads the form (r.FormValue), and
			// not by the action, which would act on what the body names,
			// or on every endpoint where the body names none.
			p := problem.New(http.StatusBadRequest, courier.CodeValidation, "a change takes no query")
			for _, name := range slices.Sorted(maps.Keys(q)) {
				p.Errors = append(p.Errors, ack.FieldError{Field: name, Rule: "query"})
			}
			problem.Write(w, p)
			return
		}
		if jsonbody.HasContentCoding(r) {
			// Courier decodes no content coding (gzip, say): what a coded
			// body carries is not what its bytes read as, a form's
			// fields or JSON's members, and an empty one reads as none,
			// which is every failed delivery to a redrive. Refused before
			// Authorize reads the body, for every change alike.
			jsonbody.UnsupportedCoding(w)
			return
		}
		if h.cfg.Authorize == nil {
			h.refuse(w, r, http.StatusForbidden, courier.CodeForbidden, "this admin is read-only")
			return
		}
		if err := h.authorize(r); err != nil {
			// 403 either way, never 401 (see Config.Authorize): the code
			// says which refusal it is.
			if courier.CodeOf(err) == courier.CodeForbidden {
				h.refuse(w, r, http.StatusForbidden, courier.CodeForbidden, "not allowed")
			} else {
				h.refuse(w, r, http.StatusForbidden, courier.CodeUnauthorized, "authorization required")
			}
			return
		}
		next(w, r)
	})
}

// authorize asks Config.Authorize about r, and gives the action r's body
// whole, whatever Authorize read of it: an Authorize that reads the body
// to decide (r.FormValue, a JSON decoder) drains it, and the action would
// read what is left, an empty body without a Content-Length to tell it
// short, which is a redrive of every endpoint's deliveries. What
// Authorize reads is kept, and read again before the rest. Authorize
// reads at most one byte over maxBody, then the body's end: it is asked
// before the caller is known, and r.FormValue would otherwise hold
// whatever anyone sends (a multipart body: 32 MiB in memory, the rest in
// temporary files), where the action refuses a body over maxBody as too
// large anyway.
func (h *Handler) authorize(r *http.Request) error {
	body := &keptBody{src: r.Body}
	r.Body = body
	err := h.cfg.Authorize(r)
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body.kept), body.src), body.src}
	return err
}

// keptBody is a request body that ends after maxBody+1 bytes, and keeps
// them. Closing it leaves the body open, for the action to read.
type keptBody struct {
	src  io.ReadCloser
	kept []byte
}

func (b *keptBody) Read(p []byte) (int, error) {
	room := maxBody + 1 - len(b.kept)
	if room <= 0 {
		return 0, io.EOF
	}
	n, err := b.src.Read(p[:min(len(p), room)])
	b.kept = append(b.kept, p[:n]...)
	return n, err
}

func (b *keptBody) Close() error { return nil }

// refuse answers a refused mutation and logs it, naming the action asked
// for and what its path names (see routeAttrs; a form's fields are not
// read: the action never ran).
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, code courier.Code, detail string) {
	attrs := append(routeAttrs(r), slog.Int(logkey.HTTPStatus, status), slog.String(logkey.Code, string(code)))
	h.cfg.Logger.InfoContext(r.Context(), "admin: mutation refused", attrs...)
	problem.Error(w, status, code, detail)
}

// routeAttrs are what a line about r names of it: the route asked for, as
// the Handler's mux matched it, and what its path names, a delivery's id
// or an endpoint's ref.
func routeAttrs(r *http.Request) []any {
	attrs := []any{slog.String(logkey.Action, r.Pattern)}
	if id, err := strconv.ParseInt(r.PathValue("id"), 10, 64); err == nil {
		attrs = append(attrs, slog.Int64(logkey.ID, id))
	}
	if ref := r.PathValue("ref"); endpoint.IsRef(ref) {
		attrs = append(attrs, slog.String(logkey.EndpointRef, ref))
	}
	return attrs
}

// respond returns what answers a store read: its value as JSON (converted
// by to), or the store's error. It is called with the read's results:
//
//	respond(h, w, r, opsjson.NewDelivery)(h.get(ctx, id))
func respond[T, J any](h *Handler, w http.ResponseWriter, r *http.Request, to func(T) J) func(T, error) {
	return func(v T, err error) {
		if err != nil {
			h.storeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, to(v))
	}
}

// storeError answers a failed store call: 404 and 400 with the error's
// own content-free message for missing rows and bad input, 503
// database_unavailable with Retry-After when the database failed or a
// read's bound passed before it answered (a request its client ended is
// logged at Info, not as a failure), 503 database_corrupt without one
// when its file is damaged (logged at Error: an operator must restore
// it), 500
// config_invalid with its message when the database is not set up for
// courier (its tables out of reach, a privilege missing), 500
// internal_error otherwise.
func (h *Handler) storeError(w http.ResponseWriter, r *http.Request, err error) {
	h.storeErrorAfter(w, r, err, "")
}

// doneBefore is what storeErrorAfter's detail adds for an action on many
// deliveries that had done n before its error, which stay done (a
// redrive moved them back to pending, a cancel cancelled them): how many,
// so that the operator knows that doing it again takes the rest.
func doneBefore(n int, done, stays string) string {
	switch {
	case n == 1:
		return "; 1 delivery was " + done + " before it, and stays " + stays
	case n > 1:
		return fmt.Sprintf("; %d deliveries were %s before it, and stay %s", n, done, stays)
	}
	return ""
}

// storeErrorAfter is storeError for an action on many deliveries that err
// ended after it had done some: before (see doneBefore) ends the
// problem's detail.
func (h *Handler) storeErrorAfter(w http.ResponseWriter, r *http.Request, err error, before string) {
	detail := "not found"
	if ce := (*coded.Error)(nil); errors.As(err, &ce) {
		detail = ce.Msg
	}
	switch code := courier.CodeOf(err); {
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() != nil:
		h.cfg.Logger.WarnContext(r.Context(), "admin: database did not answer in time", append(routeAttrs(r), slog.String(logkey.Code, string(courier.CodeDatabaseUnavailable)), slog.Any(logkey.Error, err))...)
		problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeDatabaseUnavailable, "the database did not answer in time; retry later"+before, time.Second)
	case writerctx.EndedByClient(r.Context(), err):
		h.cfg.Logger.InfoContext(r.Context(), "admin: request ended by its client", append(routeAttrs(r), slog.String(logkey.Code, string(courier.CodeDatabaseUnavailable)))...)
		problem.Error(w, http.StatusServiceUnavailable, courier.CodeDatabaseUnavailable, "the request ended before the database answered"+before)
	case code == courier.CodeNotFound:
		problem.Error(w, http.StatusNotFound, code, detail+before)
	case code == courier.CodeInvalidArgument:
		problem.Error(w, http.StatusBadRequest, code, detail+before)
	case code == courier.CodeDatabaseCorrupt: // a case of database_unavailable that no retry passes
		h.cfg.Logger.ErrorContext(r.Context(), "admin: database damaged", append(routeAttrs(r), slog.String(logkey.Code, string(code)), slog.Any(logkey.Error, err))...)
		problem.Error(w, http.StatusServiceUnavailable, code, "the database file is damaged: it answers no request until it is restored"+before)
	case code == courier.CodeDatabaseUnavailable:
		h.cfg.Logger.WarnContext(r.Context(), "admin: database unavailable", append(routeAttrs(r), slog.String(logkey.Code, string(code)), slog.Any(logkey.Error, err))...)
		problem.RetryAfter(w, http.StatusServiceUnavailable, code, "the database is unavailable; retry later"+before, time.Second)
	case code == courier.CodeConfigInvalid:
		h.cfg.Logger.ErrorContext(r.Context(), "admin: database not set up for courier", append(routeAttrs(r), slog.String(logkey.Code, string(code)), slog.Any(logkey.Error, err))...)
		problem.Error(w, http.StatusInternalServerError, code, detail+before)
	default:
		h.cfg.Logger.ErrorContext(r.Context(), "admin: store failed", append(routeAttrs(r), slog.String(logkey.Code, string(courier.CodeInternal)), slog.Any(logkey.Error, err))...)
		problem.Error(w, http.StatusInternalServerError, courier.CodeInternal, "the store failed"+before)
	}
}

// decodeJSON reads a mutation's JSON body the way the receivers read
// theirs: application/json (415; mutate refused a content coding), bounded
// (413), one strict JSON document without unknown members (400). It
// answers the refusal itself.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBody(w, r, v, false)
}

// decodeOptionalJSON is decodeJSON for a request whose body may be left
// out: an empty body stands for {}, whatever its Content-Type (curl
// sends a form's for an empty -d), and leaves v as it is.
func decodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBody(w, r, v, true)
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	// A body under a content coding (gzip, say) is not the JSON it
	// carries, and courier decodes none: mutate refused it before it
	// came here, empty or not, as the receivers refuse it.
	if optional && r.ContentLength == 0 { // on a server, a Content-Length of 0 or no body at all
		return true
	}
	// A chunked body that may be left out is read first: empty, it is
	// none, whatever its Content-Type.
	unsized := optional && r.ContentLength < 0
	if !unsized && !jsonbody.IsJSONRequest(r) {
		jsonbody.Unsupported(w)
		return false
	}
	body, ok := middleware.ReadBody(w, r, middleware.BodyLimits{MaxBytes: maxBody})
	switch {
	case !ok:
		return false
	case unsized && len(body) == 0:
		return true
	case unsized && !jsonbody.IsJSONRequest(r):
		jsonbody.Unsupported(w)
		return false
	}
	return jsonbody.Decode(w, body, v, false)
}

// noBody reads the body of an action that reads none: the path names all
// it acts on. An empty body, or a JSON object without members, is taken;
// any member is refused as decodeJSON refuses a member the action does
// not read, 400 validation_failed with rule unknown (and a body that is
// not JSON, 415): a caller that sends {"endpoint_ref": …} to narrow the
// action must not have it taken as the path alone names it. It answers
// the refusal itself.
func noBody(w http.ResponseWriter, r *http.Request) bool {
	return decodeOptionalJSON(w, r, &struct{}{})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // the Handler's own types always marshal
		problem.Error(w, http.StatusInternalServerError, courier.CodeInternal, "encoding failed")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(b)+1))
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
