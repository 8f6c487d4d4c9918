package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/store"
)

// adminMaxBody bounds the body of an Admin mutation (JSON or form).
const adminMaxBody = 16 << 10

// AdminConfig configures an Admin.
type AdminConfig struct {
	// Store is the outbox the Admin reports on and acts on. Required.
	Store *store.Store
	// Authorize decides whether r may change anything: redrive, cancel,
	// enable or disable. It returns nil to allow. An error whose code is
	// courier.CodeForbidden (courier.NewError(courier.CodeForbidden, …))
	// answers 403 forbidden: the caller is known but may not act; any
	// other error answers 401 unauthorized. Defaults to nil: the Admin is
	// read-only and every mutation answers 403 forbidden.
	//
	// Reads are not authorized here: mount the Admin behind the
	// application's own authentication.
	Authorize func(r *http.Request) error
	// Logger receives one line per mutation, refusal and store failure;
	// never payloads, endpoint URLs or credentials. Defaults to
	// discarding.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c AdminConfig) WithDefaults() AdminConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c AdminConfig) validate() error {
	if c.Store == nil {
		return configError("AdminConfig.Store is required")
	}
	return nil
}

// Admin is the sender side's operations surface: a JSON API and a
// server-rendered ops page over the outbox. It serves paths relative to
// where it is mounted, and every link, form and redirect it writes is
// relative, so it works under any prefix:
//
//	mux.Handle("/ops/courier/", http.StripPrefix("/ops/courier", admin))
//
// The JSON API (errors are application/problem+json with a stable code):
//
//	GET  /api/health                    the outbox's health (AdminHealth)
//	GET  /api/deliveries                a page of deliveries, newest first (AdminDeliveryPage);
//	                                    query: status, endpoint, since, until (RFC 3339,
//	                                    on the last update), before (NextBefore of the
//	                                    previous page), limit (1..1000, default 100)
//	GET  /api/deliveries/{id}           one delivery and its attempts (AdminDeliveryDetail)
//	POST /api/deliveries/{id}/redrive   a failed delivery back to pending (AdminRedriven)
//	POST /api/deliveries/{id}/cancel    withdraw a pending or retrying delivery (AdminDelivery)
//	POST /api/redrive                   {"endpoint": "…"}: its failed deliveries back to
//	                                    pending; "" for every endpoint (AdminRedriven)
//	GET  /api/endpoints                 endpoints that are not plainly healthy ([]AdminEndpoint)
//	POST /api/endpoints/enable          {"endpoint": "…"}: close its breaker (AdminEndpoint)
//	POST /api/endpoints/disable         {"endpoint": "…"}: stop sending to it (AdminEndpoint)
//
// The ops page, for people (HTML, no scripts, nothing loaded from the
// network):
//
//	GET  /                              health, failing endpoints, recent failures
//	GET  /deliveries/{id}               one delivery and its attempts
//	POST /ops/redrive                   form: id, or endpoint, or neither for every failed delivery
//	POST /ops/cancel                    form: id
//	POST /ops/endpoints/enable          form: endpoint
//	POST /ops/endpoints/disable         form: endpoint
//
// The form posts answer 303 See Other back to the page. Every mutation,
// JSON or form, is refused when it comes from another site (the browser's
// Sec-Fetch-Site or Origin says so; see http.CrossOriginProtection) and
// then goes through AdminConfig.Authorize.
type Admin struct {
	cfg   AdminConfig
	mux   *http.ServeMux
	cop   http.CrossOriginProtection
	pages *template.Template
}

// NewAdmin returns an Admin over cfg.Store.
func NewAdmin(cfg AdminConfig) (*Admin, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pages, err := adminTemplates()
	if err != nil {
		return nil, err
	}
	a := &Admin{cfg: cfg, mux: http.NewServeMux(), pages: pages}
	routes := []struct {
		pattern string
		h       http.Handler
	}{
		{"/api/health", a.read(a.apiHealth)},
		{"/api/deliveries", a.read(a.apiList)},
		{"/api/deliveries/{id}", a.read(a.apiGet)},
		{"/api/deliveries/{id}/redrive", a.mutate(a.apiRedriveOne)},
		{"/api/deliveries/{id}/cancel", a.mutate(a.apiCancel)},
		{"/api/redrive", a.mutate(a.apiRedrive)},
		{"/api/endpoints", a.read(a.apiEndpoints)},
		{"/api/endpoints/enable", a.mutate(a.apiEndpoint("enable", a.cfg.Store.Endpoints.Enable))},
		{"/api/endpoints/disable", a.mutate(a.apiEndpoint("disable", a.cfg.Store.Endpoints.Disable))},
		{"/{$}", a.read(a.pageIndex)},
		{"/deliveries/{id}", a.read(a.pageDelivery)},
		{"/ops/redrive", a.mutate(a.opsRedrive)},
		{"/ops/cancel", a.mutate(a.opsCancel)},
		{"/ops/endpoints/enable", a.mutate(a.opsEndpoint("enable", a.cfg.Store.Endpoints.Enable))},
		{"/ops/endpoints/disable", a.mutate(a.opsEndpoint("disable", a.cfg.Store.Endpoints.Disable))},
		{"/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			problem.Error(w, http.StatusNotFound, courier.CodeNotFound, "no such page")
		})},
	}
	for _, r := range routes {
		a.mux.Handle(r.pattern, r.h)
	}
	return a, nil
}

// ServeHTTP implements http.Handler.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "" {
		a.mountPoint(w, r)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// mountPoint answers a request for the mount point without its slash
// (http.StripPrefix leaves the path ""): it sends the browser to the
// slashed form, so that relative links resolve under it.
func (a *Admin) mountPoint(w http.ResponseWriter, r *http.Request) {
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		if base := path.Base(u.EscapedPath()); base != "/" && base != "." {
			w.Header().Set("Location", "./"+base+"/")
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
	}
	problem.Error(w, http.StatusNotFound, courier.CodeNotFound, "no such page")
}

// read admits GET and HEAD.
func (a *Admin) read(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			problem.Error(w, http.StatusMethodNotAllowed, courier.CodeMethodNotAllowed, "use GET")
			return
		}
		h(w, r)
	})
}

// mutate admits a POST from the same site that Authorize allows.
func (a *Admin) mutate(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			problem.Error(w, http.StatusMethodNotAllowed, courier.CodeMethodNotAllowed, "use POST")
			return
		}
		if err := a.cop.Check(r); err != nil {
			a.refuse(w, r, http.StatusForbidden, courier.CodeForbidden, "cross-origin request refused")
			return
		}
		if a.cfg.Authorize == nil {
			a.refuse(w, r, http.StatusForbidden, courier.CodeForbidden, "this admin is read-only")
			return
		}
		if err := a.cfg.Authorize(r); err != nil {
			if courier.CodeOf(err) == courier.CodeForbidden {
				a.refuse(w, r, http.StatusForbidden, courier.CodeForbidden, "not allowed")
			} else {
				a.refuse(w, r, http.StatusUnauthorized, courier.CodeUnauthorized, "authorization required")
			}
			return
		}
		h(w, r)
	})
}

func (a *Admin) refuse(w http.ResponseWriter, r *http.Request, status int, code courier.Code, detail string) {
	a.cfg.Logger.InfoContext(r.Context(), "admin: mutation refused", slog.String("code", string(code)))
	problem.Error(w, status, code, detail)
}

// storeError answers a failed store call: 404 and 400 with the error's
// own content-free message for missing rows and bad input, 500
// internal_error otherwise.
func (a *Admin) storeError(w http.ResponseWriter, r *http.Request, err error) {
	var ce *courier.Error
	errors.As(err, &ce)
	switch code := courier.CodeOf(err); code {
	case courier.CodeNotFound:
		problem.Error(w, http.StatusNotFound, code, ce.Msg)
	case courier.CodeInvalidArgument:
		problem.Error(w, http.StatusBadRequest, code, ce.Msg)
	default:
		a.cfg.Logger.ErrorContext(r.Context(), "admin: store failed", slog.String("code", string(courier.CodeInternal)), slog.Any("error", err))
		problem.Error(w, http.StatusInternalServerError, courier.CodeInternal, "the store failed")
	}
}

// AdminHealth is the outbox's health (GET /api/health).
type AdminHealth struct {
	Status              store.HealthStatus     `json:"status"` // "ok" or "blocked"
	Code                courier.Code           `json:"code,omitempty"`
	Counts              map[courier.Status]int `json:"counts"`
	Due                 int                    `json:"due"`
	ExpiredLeases       int                    `json:"expired_leases"`
	Failed              int                    `json:"failed"`
	OldestDueAgeSeconds float64                `json:"oldest_due_age_seconds"`
}

// AdminDelivery is one delivery. It never carries payload bytes: the
// detail has their digest, a page not even that.
type AdminDelivery struct {
	ID             int64          `json:"id"`
	NotificationID string         `json:"notification_id"`
	Endpoint       string         `json:"endpoint"`
	PayloadSHA256  string         `json:"payload_sha256,omitempty"`
	Profile        string         `json:"profile"`
	KeyID          string         `json:"key_id,omitempty"`
	Status         courier.Status `json:"status"`
	Priority       int            `json:"priority"`
	Attempts       int            `json:"attempts"`
	MaxAttempts    int            `json:"max_attempts"`
	NextAttemptAt  time.Time      `json:"next_attempt_at,omitzero"`
	Deadline       time.Time      `json:"deadline,omitzero"`
	LeaseOwner     string         `json:"lease_owner,omitempty"`
	LeasedAt       time.Time      `json:"leased_at,omitzero"`
	LeaseExpiresAt time.Time      `json:"lease_expires_at,omitzero"`
	LastErrorCode  courier.Code   `json:"last_error_code,omitempty"`
	LastStatus     int            `json:"last_status,omitempty"`
	AckSHA256      string         `json:"ack_sha256,omitempty"`
	SubscriptionID int64          `json:"subscription_id,omitempty"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
}

// AdminAttempt is one row of a delivery's attempts log.
type AdminAttempt struct {
	Attempt        int                  `json:"attempt"`
	Owner          string               `json:"owner"`
	LeasedAt       time.Time            `json:"leased_at"`
	LeaseExpiresAt time.Time            `json:"lease_expires_at"`
	FinishedAt     time.Time            `json:"finished_at"`
	DurationMS     float64              `json:"duration_ms"`
	Outcome        store.AttemptOutcome `json:"outcome"`
	HTTPStatus     int                  `json:"http_status,omitempty"`
	ErrorCode      courier.Code         `json:"error_code,omitempty"`
}

// AdminDeliveryDetail is GET /api/deliveries/{id}.
type AdminDeliveryDetail struct {
	Delivery AdminDelivery  `json:"delivery"`
	Attempts []AdminAttempt `json:"attempts"`
}

// AdminDeliveryPage is GET /api/deliveries: pass NextBefore as before
// for the next page; it is absent on the last.
type AdminDeliveryPage struct {
	Deliveries []AdminDelivery `json:"deliveries"`
	NextBefore int64           `json:"next_before,omitempty"`
}

// AdminRedriven is how many failed deliveries a redrive moved back to
// pending.
type AdminRedriven struct {
	Redriven int `json:"redriven"`
}

// AdminEndpointRequest is the body of POST /api/redrive and
// /api/endpoints/{enable,disable}.
type AdminEndpointRequest struct {
	Endpoint string `json:"endpoint"`
}

// AdminEndpoint is an endpoint's breaker state.
type AdminEndpoint struct {
	Endpoint            string              `json:"endpoint"`
	State               store.EndpointState `json:"state"` // closed, open, half_open or disabled
	ConsecutiveFailures int                 `json:"consecutive_failures"`
	FailingSince        time.Time           `json:"failing_since,omitzero"`
	OpenUntil           time.Time           `json:"open_until,omitzero"`
	Reason              courier.Code        `json:"reason,omitempty"`
	UpdatedAt           time.Time           `json:"updated_at,omitzero"`
}

func adminHealth(h store.Health) AdminHealth {
	return AdminHealth{
		Status: h.Status, Code: h.Code, Counts: h.Counts, Due: h.Due, ExpiredLeases: h.ExpiredLeases,
		Failed: h.Failed, OldestDueAgeSeconds: h.OldestDueAge.Seconds(),
	}
}

func adminDelivery(d store.Delivery) AdminDelivery {
	return AdminDelivery{
		ID: d.ID, NotificationID: d.NotificationID, Endpoint: d.Endpoint, PayloadSHA256: d.PayloadSHA256,
		Profile: d.Profile, KeyID: d.KeyID, Status: d.Status, Priority: d.Priority, Attempts: d.Attempts,
		MaxAttempts: d.MaxAttempts, NextAttemptAt: utc(d.NextAttemptAt), Deadline: utc(d.Deadline),
		LeaseOwner: d.LeaseOwner, LeasedAt: utc(d.LeasedAt), LeaseExpiresAt: utc(d.LeaseExpiresAt),
		LastErrorCode: d.LastErrorCode, LastStatus: d.LastStatus, AckSHA256: d.AckSHA256,
		SubscriptionID: d.SubscriptionID, CreatedAt: utc(d.CreatedAt), UpdatedAt: utc(d.UpdatedAt),
	}
}

func adminAttempt(at store.Attempt) AdminAttempt {
	return AdminAttempt{
		Attempt: at.Attempt, Owner: at.Owner, LeasedAt: utc(at.LeasedAt), LeaseExpiresAt: utc(at.LeaseExpiresAt),
		FinishedAt: utc(at.FinishedAt), DurationMS: float64(at.Duration.Microseconds()) / 1000,
		Outcome: at.Outcome, HTTPStatus: at.HTTPStatus, ErrorCode: at.ErrorCode,
	}
}

func adminEndpoint(e store.EndpointHealth) AdminEndpoint {
	return AdminEndpoint{
		Endpoint: e.Endpoint, State: e.State, ConsecutiveFailures: e.ConsecutiveFailures,
		FailingSince: utc(e.FailingSince), OpenUntil: utc(e.OpenUntil), Reason: e.Reason, UpdatedAt: utc(e.UpdatedAt),
	}
}

// utc returns t in UTC; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func (a *Admin) apiHealth(w http.ResponseWriter, r *http.Request) {
	h, err := a.cfg.Store.Outbox.Health(r.Context())
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, adminHealth(h))
}

func (a *Admin) apiList(w http.ResponseWriter, r *http.Request) {
	p, fields := listParams(r.URL.Query())
	if len(fields) > 0 {
		pr := problem.New(http.StatusBadRequest, courier.CodeInvalidArgument, "the query is not valid")
		pr.Errors = fields
		problem.Write(w, pr)
		return
	}
	page, err := a.cfg.Store.Outbox.List(r.Context(), p)
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	out := AdminDeliveryPage{Deliveries: make([]AdminDelivery, 0, len(page.Deliveries)), NextBefore: page.NextBefore}
	for _, d := range page.Deliveries {
		out.Deliveries = append(out.Deliveries, adminDelivery(d))
	}
	writeJSON(w, http.StatusOK, out)
}

// listParams reads GET /api/deliveries' query, naming every bad field.
func listParams(q url.Values) (store.ListParams, []problem.FieldError) {
	var (
		p      store.ListParams
		fields []problem.FieldError
	)
	bad := func(field, rule string) { fields = append(fields, problem.FieldError{Field: field, Rule: rule}) }
	if v := q.Get("status"); v != "" {
		if p.Status = courier.Status(v); !p.Status.Valid() {
			bad("status", "oneof")
		}
	}
	if p.Endpoint = q.Get("endpoint"); len(p.Endpoint) > store.MaxEndpointSize {
		bad("endpoint", "max")
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"since", &p.Since}, {"until", &p.Until}} {
		if v := q.Get(f.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				bad(f.name, "rfc3339")
			}
			*f.dst = t
		}
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			bad("before", "min")
		}
		p.Before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			bad("limit", "range")
		}
		p.Limit = n
	}
	return p, fields
}

// deliveryID reads the {id} path segment, answering 404 itself when it is
// not a delivery id.
func deliveryID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		problem.Error(w, http.StatusNotFound, courier.CodeNotFound, "no such delivery")
		return 0, false
	}
	return id, true
}

func (a *Admin) apiGet(w http.ResponseWriter, r *http.Request) {
	id, ok := deliveryID(w, r)
	if !ok {
		return
	}
	d, attempts, err := a.delivery(r, id)
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	out := AdminDeliveryDetail{Delivery: adminDelivery(d), Attempts: make([]AdminAttempt, 0, len(attempts))}
	for _, at := range attempts {
		out.Attempts = append(out.Attempts, adminAttempt(at))
	}
	writeJSON(w, http.StatusOK, out)
}

// delivery loads a delivery and its attempts.
func (a *Admin) delivery(r *http.Request, id int64) (store.Delivery, []store.Attempt, error) {
	d, err := a.cfg.Store.Outbox.Get(r.Context(), id)
	if err != nil {
		return d, nil, err
	}
	attempts, err := a.cfg.Store.Outbox.Attempts(r.Context(), id)
	return d, attempts, err
}

func (a *Admin) apiRedriveOne(w http.ResponseWriter, r *http.Request) {
	id, ok := deliveryID(w, r)
	if !ok {
		return
	}
	n, err := a.redrive(r, store.RedriveParams{ID: id})
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, AdminRedriven{Redriven: n})
}

func (a *Admin) apiRedrive(w http.ResponseWriter, r *http.Request) {
	var req AdminEndpointRequest
	if !decodeAdminJSON(w, r, &req) {
		return
	}
	if len(req.Endpoint) > store.MaxEndpointSize {
		endpointInvalid(w, "max")
		return
	}
	n, err := a.redrive(r, store.RedriveParams{Endpoint: req.Endpoint})
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, AdminRedriven{Redriven: n})
}

// redrive moves failed deliveries back to pending. For one delivery, a
// missing one is ErrNotFound; one that is not failed counts 0.
func (a *Admin) redrive(r *http.Request, p store.RedriveParams) (int, error) {
	ctx := r.Context()
	n, err := a.cfg.Store.Outbox.Redrive(ctx, p)
	if err != nil {
		return 0, err
	}
	if n == 0 && p.ID != 0 {
		if _, err := a.cfg.Store.Outbox.Get(ctx, p.ID); err != nil {
			return 0, err
		}
	}
	a.cfg.Logger.InfoContext(ctx, "admin: redrive", slog.Int64("id", p.ID), slog.Bool("by_endpoint", p.Endpoint != ""), slog.Int("count", n))
	return n, nil
}

func (a *Admin) apiCancel(w http.ResponseWriter, r *http.Request) {
	id, ok := deliveryID(w, r)
	if !ok {
		return
	}
	if err := a.cancel(r, id); err != nil {
		a.storeError(w, r, err)
		return
	}
	d, err := a.cfg.Store.Outbox.Get(r.Context(), id)
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, adminDelivery(d))
}

// cancel withdraws a pending or retrying delivery; any other is
// ErrNotFound.
func (a *Admin) cancel(r *http.Request, id int64) error {
	err := a.cfg.Store.Outbox.Cancel(r.Context(), id)
	if errors.Is(err, courier.ErrNotFound) {
		return courier.Wrap(courier.ErrNotFound, courier.CodeNotFound, "no pending or retrying delivery with this id")
	}
	if err != nil {
		return err
	}
	a.cfg.Logger.InfoContext(r.Context(), "admin: cancel", slog.Int64("id", id))
	return nil
}

func (a *Admin) apiEndpoints(w http.ResponseWriter, r *http.Request) {
	hs, err := a.cfg.Store.Endpoints.List(r.Context())
	if err != nil {
		a.storeError(w, r, err)
		return
	}
	out := make([]AdminEndpoint, 0, len(hs))
	for _, h := range hs {
		out = append(out, adminEndpoint(h))
	}
	writeJSON(w, http.StatusOK, out)
}

// apiEndpoint serves an action on an endpoint (enable or disable),
// answering the endpoint's state afterwards.
func (a *Admin) apiEndpoint(action string, act func(ctx context.Context, endpoint string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req AdminEndpointRequest
		if !decodeAdminJSON(w, r, &req) {
			return
		}
		if rule := endpointRule(req.Endpoint); rule != "" {
			endpointInvalid(w, rule)
			return
		}
		if err := a.endpointAct(r, action, act, req.Endpoint); err != nil {
			a.storeError(w, r, err)
			return
		}
		h, err := a.cfg.Store.Endpoints.Get(r.Context(), req.Endpoint)
		if err != nil {
			a.storeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, adminEndpoint(h))
	}
}

// endpointAct runs an action on an endpoint and logs it.
func (a *Admin) endpointAct(r *http.Request, action string, act func(ctx context.Context, endpoint string) error, endpoint string) error {
	if err := act(r.Context(), endpoint); err != nil {
		return err
	}
	a.cfg.Logger.InfoContext(r.Context(), "admin: endpoint", slog.String("action", action))
	return nil
}

// endpointRule names the rule an endpoint to enable or disable breaks,
// "" when it breaks none.
func endpointRule(e string) string {
	switch {
	case e == "":
		return "required"
	case len(e) > store.MaxEndpointSize:
		return "max"
	}
	return ""
}

func endpointInvalid(w http.ResponseWriter, rule string) {
	p := problem.New(http.StatusBadRequest, courier.CodeValidation, "the request is not valid")
	p.Errors = []problem.FieldError{{Field: "endpoint", Rule: rule}}
	problem.Write(w, p)
}

// decodeAdminJSON reads a bounded, strict JSON body into v, answering the
// refusal itself when it cannot.
func decodeAdminJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if !isJSON(r.Header.Get("Content-Type")) {
		problem.Error(w, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType, "use application/json")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, adminMaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			problem.Error(w, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge, "the body is too large")
		} else {
			problem.Error(w, http.StatusBadRequest, courier.CodeMalformedJSON, "the body could not be read")
		}
		return false
	}
	if err := ack.Check(body); err != nil {
		code := courier.CodeMalformedJSON
		if errors.Is(err, ack.ErrDuplicateKey) {
			code = courier.CodeDuplicateKey
		}
		problem.Error(w, http.StatusBadRequest, code, "the body is not a valid JSON document")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		p := problem.New(http.StatusBadRequest, courier.CodeValidation, "the request is not valid")
		if ve := ack.DecodeError(err); ve != nil {
			for _, f := range ve.Fields {
				p.Errors = append(p.Errors, problem.FieldError{Field: f.Field, Rule: f.Rule})
			}
		}
		problem.Write(w, p)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // the Admin's own types always marshal
		problem.Error(w, http.StatusInternalServerError, courier.CodeInternal, "encoding failed")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
