package admin

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/courier-go/courier/internal/opsjson"
	"github.com/courier-go/courier/internal/wire"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/store"
)

// The ops page's limits.
const (
	opsFailures  = 50  // recent failures shown
	opsLatest    = 20  // latest deliveries shown
	opsEndpoints = 100 // endpoints shown, those that most need an operator
	opsContracts = 100 // contract pins shown, those that most need an operator
)

//go:embed templates/*.html
var templateFS embed.FS

// adminCSS is the ops page's only style, inlined: the page loads nothing.
const adminCSS = `body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#222;color:#fff;padding:.6em 1em}header a{color:#fff;font-weight:600;text-decoration:none}
main{padding:0 1em 2em;max-width:90em}h2{font-size:1.1em;margin:1.4em 0 .5em}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}th{background:#f0f0f0;font-weight:600}
td.ep{word-break:break-all}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:600}dd{margin:0}
.tag{display:inline-block;padding:0 .4em;border-radius:3px}
.ok,.closed,.succeeded{background:#d7f5dd}.blocked,.failed,.open,.disabled,.quarantined{background:#fbd5d5}
.half_open,.pending,.leased,.retry_wait{background:#fff1c2}.suppressed{background:#e4e4e4}
.flash{background:#e6f0ff;border:1px solid #9bbcf0;padding:.5em 1em}.quiet{color:#777}
.ro{background:#555;padding:0 .4em;border-radius:3px;font-size:.85em;font-weight:400}
form.inline{display:inline}section>form{margin:.5em 0}code{font:12px ui-monospace,monospace}`

// adminCSP lets the page use its inline style and post forms to itself,
// and nothing else: no scripts, no network, no framing.
var adminCSP = func() string {
	sum := sha256.Sum256([]byte(adminCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}()

func templates() (*template.Template, error) {
	t, err := template.New("admin").Funcs(template.FuncMap{
		"css":  func() template.CSS { return adminCSS },
		"when": opsTime,
		"age":  opsAge,
	}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, configError("ops page templates: " + err.Error())
	}
	return t, nil
}

// opsTime shows a time in UTC, "–" for none.
func opsTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// opsAge shows a duration to the second, "–" for none.
func opsAge(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return d.Round(time.Second).String()
}

// opsCommon is what every ops page needs.
type opsCommon struct {
	Title    string
	Root     string // the relative path back to the Admin's root: "./", "../", …
	ReadOnly bool
}

type opsIndex struct {
	opsCommon
	Flash      string
	Health     store.Health
	Statuses   []courier.Status
	Operations []string // command operations, when any command was enqueued
	// Contracts is the opsContracts of the ContractCount pins that most
	// need an operator: those holding the most deliveries back, then the
	// latest (the query contract_top); ContractsHolding counts the pins
	// holding any back.
	Contracts        []contractJSON
	ContractCount    int
	ContractsHolding int
	// Endpoints is the opsEndpoints of the EndpointCount endpoints with
	// something to show that most need an operator: failing now (open or
	// half open), then holding ordering keys (a failed delivery blocks
	// each), then disabled (nothing is sent until an operator enables
	// it), then failing but still closed, then those only limited or
	// busy; within each, the breaker's latest change first, then the
	// busiest, then by URL. An outbox may keep tens of thousands of
	// disabled endpoints, most long gone: an endpoint failing now comes
	// before all of them. The store ranks them and counts them all (the
	// query endpoint_top); EndpointStates counts those whose breaker is
	// not closed among all.
	Endpoints      []endpointJSON
	EndpointCount  int
	EndpointStates struct{ Open, HalfOpen, Disabled int }
	Failures       []opsjson.Delivery
	MoreFailures   bool
	// Unreadable is the newest quarantines Redrive takes (their payload
	// key was missing or other when a worker claimed them).
	Unreadable []opsjson.Delivery
	Latest     []opsjson.Delivery
}

// opsTable is a table of deliveries, with a redrive button on each row
// when Redrive is set.
type opsTable struct {
	Root     string
	ReadOnly bool
	Rows     []opsjson.Delivery
	Redrive  bool
}

// FailureTable is the recent failures, to redrive.
func (p opsIndex) FailureTable() opsTable {
	return opsTable{Root: p.Root, ReadOnly: p.ReadOnly, Rows: p.Failures, Redrive: true}
}

// UnreadableTable is the recent quarantines a redrive takes, to redrive.
func (p opsIndex) UnreadableTable() opsTable {
	return opsTable{Root: p.Root, ReadOnly: p.ReadOnly, Rows: p.Unreadable, Redrive: true}
}

// LatestTable is the latest deliveries, whatever their status.
func (p opsIndex) LatestTable() opsTable {
	return opsTable{Root: p.Root, ReadOnly: p.ReadOnly, Rows: p.Latest}
}

// opsSearch is one notification's deliveries.
type opsSearch struct {
	opsCommon
	NotificationID string
	Rows           []opsjson.Delivery
	More           bool // more than a page
}

// Table is the notification's deliveries.
func (p opsSearch) Table() opsTable {
	return opsTable{Root: p.Root, ReadOnly: p.ReadOnly, Rows: p.Rows}
}

type opsDelivery struct {
	opsCommon
	Delivery   opsjson.Delivery
	Attempts   []store.Attempt
	CanRedrive bool
	CanCancel  bool
}

// opsRoot is the relative reference from r's path back to the Admin's
// root, so links work under whatever prefix the Admin is mounted at.
func opsRoot(r *http.Request) string {
	depth := strings.Count(r.URL.Path, "/") - 1
	if depth <= 0 {
		return "./"
	}
	return strings.Repeat("../", depth)
}

func (h *Handler) common(r *http.Request, title string) opsCommon {
	return opsCommon{Title: title, Root: opsRoot(r), ReadOnly: h.cfg.Authorize == nil}
}

func (h *Handler) pageIndex(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	data := opsIndex{opsCommon: h.common(r, "Outbox"), Flash: opsFlash(r.URL.Query()), Statuses: courier.Statuses()}
	var err error
	if data.Health, err = h.cfg.Store.Outbox.Health(ctx); err != nil {
		h.storeError(w, r, err)
		return
	}
	operations := []string{ack.OperationChange, ack.OperationCancellation, ack.OperationTombstone}
	for _, op := range operations {
		for _, n := range data.Health.Operations[op] {
			if n > 0 { // the outbox has commands: show their counts
				data.Operations = operations
			}
		}
	}
	lists := h.lists()
	contracts, count, holding, err := lists.ContractTop(ctx, opsContracts)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	data.ContractCount, data.ContractsHolding = count, holding
	data.Contracts = each(contracts, toContract)
	endpoints, count, states, err := lists.EndpointTop(ctx, opsEndpoints)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	data.EndpointCount = count
	data.EndpointStates.Open = states[string(store.EndpointOpen)]
	data.EndpointStates.HalfOpen = states[string(store.EndpointHalfOpen)]
	data.EndpointStates.Disabled = states[string(store.EndpointDisabled)]
	data.Endpoints = each(endpoints, toEndpoint)
	failures, err := h.cfg.Store.Outbox.List(ctx, store.ListParams{Status: courier.StatusFailed, Limit: opsFailures})
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	data.Failures, data.MoreFailures = each(failures.Deliveries, opsjson.NewDelivery), failures.NextBefore != 0
	quarantined, err := h.cfg.Store.Outbox.List(ctx, store.ListParams{Status: courier.StatusQuarantined, Limit: opsFailures})
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	for _, d := range quarantined.Deliveries {
		if d.Redrivable() {
			data.Unreadable = append(data.Unreadable, opsjson.NewDelivery(d))
		}
	}
	latest, err := h.cfg.Store.Outbox.List(ctx, store.ListParams{Limit: opsLatest})
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	data.Latest = each(latest.Deliveries, opsjson.NewDelivery)
	h.render(w, r, "index", data)
}

// opsFlash is the message for the ?done= a form post redirected with.
// Only fixed messages are shown: a crafted link cannot put words on the
// page.
func opsFlash(q url.Values) string {
	switch q.Get("done") {
	case "redrive":
		return counted(q, "Moved 1 delivery back to pending.", "Moved %d deliveries back to pending.")
	case "cancel":
		return "Delivery cancelled."
	case "enable":
		return "Endpoint enabled."
	case "disable":
		if q.Get("unknown") == "1" {
			return "Endpoint disabled. The database knew no endpoint at that URL (no deliveries, breaker, limits, " +
				"subscription or contract pin): check it for a typo; enabling it undoes the disable."
		}
		return "Endpoint disabled."
	case "pin":
		return "Contract pinned."
	case "fail-mismatched":
		return counted(q, "Failed 1 delivery held back by its contract.", "Failed %d deliveries held back by their contract.")
	}
	return ""
}

// counted is the message for the count in ?n=: one for 1, many (with a %d)
// for any other count, none for a count that is not one.
func counted(q url.Values, one, many string) string {
	n, err := strconv.Atoi(q.Get("n"))
	switch {
	case err != nil || n < 0:
		return ""
	case n == 1:
		return one
	}
	return fmt.Sprintf(many, n)
}

func (h *Handler) pageDelivery(w http.ResponseWriter, r *http.Request) {
	d, attempts, ok := h.delivery(w, r)
	if !ok {
		return
	}
	h.render(w, r, "delivery", opsDelivery{
		opsCommon: h.common(r, "Delivery "+strconv.FormatInt(d.ID, 10)),
		Delivery:  opsjson.NewDelivery(d), Attempts: attempts,
		CanRedrive: d.Redrivable(),
		CanCancel: d.Status == courier.StatusPending || d.Status == courier.StatusRetryWait || d.Status == courier.StatusQuarantined ||
			d.Status == courier.StatusFailed,
	})
}

// pageSearch lists one notification's deliveries: the search form's
// answer.
func (h *Handler) pageSearch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if len(q["notification_id"]) > 1 { // which one counts would depend on who reads it
		invalid(w, "the search is not valid", "notification_id", "single")
		return
	}
	id := q.Get("notification_id")
	if !wire.IsToken(id) {
		invalid(w, "the search is not valid", "notification_id", "courier_token")
		return
	}
	page, err := h.cfg.Store.Outbox.List(r.Context(), store.ListParams{NotificationID: id, Limit: opsFailures})
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.render(w, r, "search", opsSearch{
		opsCommon:      h.common(r, "Notification "+id),
		NotificationID: id, Rows: each(page.Deliveries, opsjson.NewDelivery), More: page.NextBefore != 0,
	})
}

// render executes a page in full before answering, so a failure is a
// clean 500, never half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.cfg.Logger.ErrorContext(r.Context(), "admin: page failed", slog.String(logkey.Code, string(courier.CodeInternal)), slog.Any(logkey.Error, err))
		problem.Error(w, http.StatusInternalServerError, courier.CodeInternal, "the page failed")
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	hd.Set("Content-Security-Policy", adminCSP)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// opsForm reads a bounded urlencoded form post that names only fields,
// each at most once, answering the refusal itself when it cannot. A field
// the action does not read (a misspelt name would leave the action at its
// broadest: a redrive without id or endpoint_ref takes every failed
// delivery) is 400 validation_failed with rule unknown, and a field given
// twice (which value counts would depend on who reads the form) with rule
// single, as a JSON body's unknown or repeated member is refused. Its
// Content-Type is one line, as a JSON body's is (jsonbody.IsJSONRequest):
// two would be read as whichever comes first.
func opsForm(w http.ResponseWriter, r *http.Request, fields ...string) (url.Values, bool) {
	if !isForm(r.Header.Values("Content-Type")) {
		problem.Error(w, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType, "use application/x-www-form-urlencoded")
		return nil, false
	}
	body, ok := middleware.ReadBody(w, r, middleware.BodyLimits{MaxBytes: maxBody})
	if !ok {
		return nil, false
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		problem.Error(w, http.StatusBadRequest, courier.CodeValidation, "the form could not be read")
		return nil, false
	}
	var bad []ack.FieldError
	for _, name := range slices.Sorted(maps.Keys(form)) {
		switch {
		case !slices.Contains(fields, name):
			bad = append(bad, ack.FieldError{Field: name, Rule: "unknown"})
		case len(form[name]) > 1:
			bad = append(bad, ack.FieldError{Field: name, Rule: "single"})
		}
	}
	if len(bad) > 0 {
		p := problem.New(http.StatusBadRequest, courier.CodeValidation, "the form is not valid")
		p.Errors = bad
		problem.Write(w, p)
		return nil, false
	}
	return form, true
}

// seeOther sends the browser back to the ops page after a form post, with
// what was done for its message.
func seeOther(w http.ResponseWriter, r *http.Request, done url.Values) {
	w.Header().Set("Location", opsRoot(r)+"?"+done.Encode())
	w.WriteHeader(http.StatusSeeOther)
}

func (h *Handler) opsRedrive(w http.ResponseWriter, r *http.Request) {
	form, ok := opsForm(w, r, "id", "endpoint_ref")
	if !ok {
		return
	}
	var p store.RedriveParams
	if form.Has("id") { // an empty id is refused, not taken for every delivery
		id, err := strconv.ParseInt(form.Get("id"), 10, 64)
		if err != nil || id < 1 {
			invalid(w, "the form is not valid", "id", "min")
			return
		}
		p.ID = id
	}
	if n, ok := h.redriveRef(w, r, p, form.Get("endpoint_ref"), form.Has("endpoint_ref"), "the form is not valid"); ok {
		seeOther(w, r, url.Values{"done": {"redrive"}, "n": {strconv.Itoa(n)}})
	}
}

func (h *Handler) opsCancel(w http.ResponseWriter, r *http.Request) {
	form, ok := opsForm(w, r, "id")
	if !ok {
		return
	}
	id, err := strconv.ParseInt(form.Get("id"), 10, 64)
	if err != nil || id < 1 {
		invalid(w, "the form is not valid", "id", "required")
		return
	}
	if err := h.cancel(r, id); err != nil {
		h.storeError(w, r, err)
		return
	}
	seeOther(w, r, url.Values{"done": {"cancel"}})
}

// opsEndpoint serves the form post of an action on an endpoint, named by
// endpoint_ref (the page's buttons) or, failing that, by endpoint (a URL
// an operator typed, never one the page wrote).
func (h *Handler) opsEndpoint(action string, act endpointAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		form, ok := opsForm(w, r, "endpoint_ref", "endpoint")
		if !ok {
			return
		}
		target, err := h.formEndpoint(w, r, form)
		if target == "" {
			if err != nil {
				h.storeError(w, r, err)
			}
			return
		}
		done := url.Values{"done": {action}}
		if action == actDisable && form.Get("endpoint_ref") == "" {
			// A typed URL the store does not know is most likely
			// misspelt: it is disabled all the same (an endpoint may be
			// disabled ahead of its deliveries), and the page says so,
			// asked before the disable makes it known.
			_, known, err := opsjson.KnownEndpoint(r.Context(), h.cfg.Store, target)
			if err != nil {
				h.storeError(w, r, err)
				return
			}
			if !known {
				done.Set("unknown", "1")
			}
		}
		if err := h.endpointAct(r, action, act, target); err != nil {
			h.storeError(w, r, err)
			return
		}
		seeOther(w, r, done)
	}
}

// formEndpoint reads the endpoint a form names, by one field: a form with
// both names two endpoints, of which one would be acted on and the other
// left unread, and is refused (rule excluded_with). It returns "" when it
// answered the refusal itself, or with the store's error to answer.
func (h *Handler) formEndpoint(w http.ResponseWriter, r *http.Request, form url.Values) (string, error) {
	if form.Has("endpoint_ref") && form.Has("endpoint") {
		invalid(w, "the form is not valid", "endpoint", "excluded_with")
		return "", nil
	}
	if ref := form.Get("endpoint_ref"); ref != "" {
		if !endpoint.IsRef(ref) {
			invalid(w, "the form is not valid", "endpoint_ref", "ref")
			return "", nil
		}
		return h.resolve(r, ref)
	}
	typed := form.Get("endpoint")
	switch {
	case typed == "":
		invalid(w, "the form is not valid", "endpoint_ref", "required")
		return "", nil
	case len(typed) > store.MaxEndpointSize:
		invalid(w, "the form is not valid", "endpoint", "max")
		return "", nil
	case !endpoint.Valid(typed): // as the store would refuse it, but naming the field
		invalid(w, "the form is not valid", "endpoint", "url")
		return "", nil
	}
	return typed, nil
}

// isForm reports whether a request's Content-Type lines are one, naming
// an urlencoded form.
func isForm(contentType []string) bool {
	if len(contentType) != 1 {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType[0])
	return err == nil && mt == "application/x-www-form-urlencoded"
}
