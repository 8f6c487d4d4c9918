package handler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/store"
)

// The ops page's limits.
const (
	opsFailures = 50 // recent failures shown
	opsLatest   = 20 // latest deliveries shown
)

//go:embed templates/admin_*.html
var adminTemplateFS embed.FS

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

func adminTemplates() (*template.Template, error) {
	t, err := template.New("admin").Funcs(template.FuncMap{
		"css":  func() template.CSS { return adminCSS },
		"when": opsTime,
		"age":  opsAge,
	}).ParseFS(adminTemplateFS, "templates/admin_*.html")
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
	Flash        string
	Health       store.Health
	Statuses     []courier.Status
	Endpoints    []store.EndpointHealth
	Failures     []store.Delivery
	MoreFailures bool
	Latest       []store.Delivery
}

// opsTable is a table of deliveries, with a redrive button on each row
// when Redrive is set.
type opsTable struct {
	Root     string
	ReadOnly bool
	Rows     []store.Delivery
	Redrive  bool
}

// FailureTable is the recent failures, to redrive.
func (p opsIndex) FailureTable() opsTable {
	return opsTable{Root: p.Root, ReadOnly: p.ReadOnly, Rows: p.Failures, Redrive: true}
}

// LatestTable is the latest deliveries, whatever their status.
func (p opsIndex) LatestTable() opsTable {
	return opsTable{Root: p.Root, ReadOnly: p.ReadOnly, Rows: p.Latest}
}

type opsDelivery struct {
	opsCommon
	Delivery   store.Delivery
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

func (a *Admin) common(r *http.Request, title string) opsCommon {
	return opsCommon{Title: title, Root: opsRoot(r), ReadOnly: a.cfg.Authorize == nil}
}

func (a *Admin) pageIndex(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	data := opsIndex{opsCommon: a.common(r, "Outbox"), Flash: opsFlash(r.URL.Query()), Statuses: courier.Statuses()}
	var err error
	if data.Health, err = a.cfg.Store.Outbox.Health(ctx); err != nil {
		a.storeError(w, r, err)
		return
	}
	if data.Endpoints, err = a.cfg.Store.Endpoints.List(ctx); err != nil {
		a.storeError(w, r, err)
		return
	}
	failures, err := a.cfg.Store.Outbox.List(ctx, store.ListParams{Status: courier.StatusFailed, Limit: opsFailures})
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	data.Failures, data.MoreFailures = failures.Deliveries, failures.NextBefore != 0
	latest, err := a.cfg.Store.Outbox.List(ctx, store.ListParams{Limit: opsLatest})
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	data.Latest = latest.Deliveries
	a.render(w, r, "index", data)
}

// opsFlash is the message for the ?done= a form post redirected with.
// Only fixed messages are shown: a crafted link cannot put words on the
// page.
func opsFlash(q url.Values) string {
	switch q.Get("done") {
	case "redrive":
		n, err := strconv.Atoi(q.Get("n"))
		switch {
		case err != nil || n < 0:
			return ""
		case n == 1:
			return "Moved 1 delivery back to pending."
		}
		return "Moved " + strconv.Itoa(n) + " deliveries back to pending."
	case "cancel":
		return "Delivery cancelled."
	case "enable":
		return "Endpoint enabled."
	case "disable":
		return "Endpoint disabled."
	}
	return ""
}

func (a *Admin) pageDelivery(w http.ResponseWriter, r *http.Request) {
	id, ok := deliveryID(w, r)
	if !ok {
		return
	}
	d, attempts, err := a.delivery(r, id)
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	a.render(w, r, "delivery", opsDelivery{
		opsCommon: a.common(r, "Delivery "+strconv.FormatInt(id, 10)),
		Delivery:  d, Attempts: attempts,
		CanRedrive: d.Status == courier.StatusFailed,
		CanCancel:  d.Status == courier.StatusPending || d.Status == courier.StatusRetryWait,
	})
}

// render executes a page in full before answering, so a failure is a
// clean 500, never half a page.
func (a *Admin) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	var buf bytes.Buffer
	if err := a.pages.ExecuteTemplate(&buf, name, data); err != nil {
		a.cfg.Logger.ErrorContext(r.Context(), "admin: page failed", slog.String("code", string(courier.CodeInternal)), slog.Any("error", err))
		problem.Error(w, http.StatusInternalServerError, courier.CodeInternal, "the page failed")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Content-Security-Policy", adminCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// opsForm reads a bounded urlencoded form post, answering the refusal
// itself when it cannot.
func opsForm(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		problem.Error(w, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType, "use application/x-www-form-urlencoded")
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, adminMaxBody)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			problem.Error(w, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge, "the form is too large")
		} else {
			problem.Error(w, http.StatusBadRequest, courier.CodeValidation, "the form could not be read")
		}
		return nil, false
	}
	return r.PostForm, true
}

// formInvalid answers 400 naming the form field and the rule it broke.
func formInvalid(w http.ResponseWriter, field, rule string) {
	p := problem.New(http.StatusBadRequest, courier.CodeValidation, "the form is not valid")
	p.Errors = []problem.FieldError{{Field: field, Rule: rule}}
	problem.Write(w, p)
}

// seeOther sends the browser back to the ops page after a form post, with
// what was done for its message.
func seeOther(w http.ResponseWriter, r *http.Request, done url.Values) {
	w.Header().Set("Location", opsRoot(r)+"?"+done.Encode())
	w.WriteHeader(http.StatusSeeOther)
}

func (a *Admin) opsRedrive(w http.ResponseWriter, r *http.Request) {
	form, ok := opsForm(w, r)
	if !ok {
		return
	}
	var p store.RedriveParams
	if v := form.Get("id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 1 {
			formInvalid(w, "id", "min")
			return
		}
		p.ID = id
	}
	if p.Endpoint = form.Get("endpoint"); len(p.Endpoint) > store.MaxEndpointSize {
		formInvalid(w, "endpoint", "max")
		return
	}
	n, err := a.redrive(r, p)
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	seeOther(w, r, url.Values{"done": {"redrive"}, "n": {strconv.Itoa(n)}})
}

func (a *Admin) opsCancel(w http.ResponseWriter, r *http.Request) {
	form, ok := opsForm(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(form.Get("id"), 10, 64)
	if err != nil || id < 1 {
		formInvalid(w, "id", "required")
		return
	}
	if err := a.cancel(r, id); err != nil {
		a.storeError(w, r, err)
		return
	}
	seeOther(w, r, url.Values{"done": {"cancel"}})
}

// opsEndpoint serves the form post of an action on an endpoint.
func (a *Admin) opsEndpoint(action string, act func(ctx context.Context, endpoint string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		form, ok := opsForm(w, r)
		if !ok {
			return
		}
		endpoint := form.Get("endpoint")
		if rule := endpointRule(endpoint); rule != "" {
			formInvalid(w, "endpoint", rule)
			return
		}
		if err := a.endpointAct(r, action, act, endpoint); err != nil {
			a.storeError(w, r, err)
			return
		}
		seeOther(w, r, url.Values{"done": {action}})
	}
}
