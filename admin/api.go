package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/opsjson"
	"github.com/courier-go/courier/internal/wire"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/listing"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/store"
)

// Endpoint actions.
const (
	actEnable  = "enable"
	actDisable = "disable"
)

// endpointAction is Endpoints.Enable or Endpoints.Disable.
type endpointAction func(ctx context.Context, endpoint string) error

func (h *Handler) apiHealth(w http.ResponseWriter, r *http.Request) {
	health, err := h.cfg.Store.Outbox.Health(r.Context())
	var states map[string]int
	if err == nil {
		states, err = h.lists().EndpointStates(r.Context())
	}
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toHealth(health, states))
}

func (h *Handler) apiList(w http.ResponseWriter, r *http.Request) {
	p, ref, fields := listParams(r.URL.Query())
	if len(fields) > 0 {
		invalidQuery(w, fields)
		return
	}
	if ref != "" {
		// A ref no endpoint has is 404, as for every other read and action
		// that takes one: an empty list would read as an endpoint with
		// nothing to show, where the ref is mistyped or of another database.
		url, err := h.resolve(r, ref)
		if err != nil {
			h.storeError(w, r, err)
			return
		}
		p.Endpoint = url
	}
	page, err := h.cfg.Store.Outbox.List(r.Context(), p)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, deliveryPageJSON{Deliveries: each(page.Deliveries, opsjson.NewDelivery), NextBefore: page.NextBefore})
}

// listParams reads GET /api/deliveries' query, naming every bad field,
// and refuses a parameter it does not read or one given twice (only). The
// endpoint comes back as its ref, to be resolved.
func listParams(q url.Values) (p store.ListParams, ref string, fields []ack.FieldError) {
	qr := &queryReader{q: q}
	bad := qr.bad
	if !qr.only(listQuery...) {
		return p, "", qr.fields
	}
	if v := q.Get("status"); v != "" {
		if p.Status = courier.Status(v); !slices.Contains(courier.Statuses(), p.Status) {
			bad("status", "oneof")
		}
	}
	if ref = q.Get("endpoint_ref"); ref != "" && !endpoint.IsRef(ref) {
		bad("endpoint_ref", "ref")
	}
	if p.NotificationID = q.Get("notification_id"); p.NotificationID != "" && !wire.IsToken(p.NotificationID) {
		bad("notification_id", "courier_token")
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
	if !p.Since.IsZero() && !p.Until.IsZero() && !ceilMicros(p.Since).Before(ceilMicros(p.Until)) {
		bad("until", "gtfield") // the store would refuse it, naming its own field
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			bad("before", "min")
		}
		p.Before = n
	}
	p.Limit = qr.limit(0) // the store's default
	return p, ref, qr.fields
}

// ceilMicros is t rounded up to the microsecond, as the store compares
// since and until: two within one microsecond are the same time.
func ceilMicros(t time.Time) time.Time {
	if c := t.Truncate(time.Microsecond); c.Before(t) {
		return c.Add(time.Microsecond)
	}
	return t
}

// listQuery is the parameters listParams reads.
var listQuery = []string{"status", "endpoint_ref", "notification_id", "since", "until", "before", "limit"}

// deliveryID reads the {id} path segment. One that is not a delivery id
// (a positive integer) is a bad request, not a delivery there is not: it
// answers 400 validation_failed itself, naming id (rule min, as the
// redrive form's id), as the command line refuses it as a usage error.
func deliveryID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		invalid(w, "the path is not valid: its id is not a delivery id", "id", "min")
		return 0, false
	}
	return id, true
}

func (h *Handler) apiGet(w http.ResponseWriter, r *http.Request) {
	d, attempts, ok := h.delivery(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, opsjson.NewDeliveryDetail(d, attempts))
}

// delivery loads the delivery the request's path names, with its
// attempts; a bad id or a failed store call is answered and reported as
// !ok.
func (h *Handler) delivery(w http.ResponseWriter, r *http.Request) (store.Delivery, []store.Attempt, bool) {
	id, ok := deliveryID(w, r)
	if !ok {
		return store.Delivery{}, nil, false
	}
	d, err := h.get(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err)
		return d, nil, false
	}
	attempts, err := h.cfg.Store.Outbox.Attempts(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err)
		return d, nil, false
	}
	return d, attempts, true
}

func (h *Handler) apiRedriveOne(w http.ResponseWriter, r *http.Request) {
	if !noBody(w, r) {
		return
	}
	id, ok := deliveryID(w, r)
	if !ok {
		return
	}
	n, err := h.redrive(r, store.RedriveParams{ID: id})
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, redrivenJSON{Redriven: n})
}

func (h *Handler) apiRedrive(w http.ResponseWriter, r *http.Request) {
	var req redriveRequestJSON
	if !decodeOptionalJSON(w, r, &req) {
		return
	}
	var ref string
	if req.EndpointRef != nil && json.Unmarshal(req.EndpointRef, &ref) != nil {
		invalid(w, "the request is not valid", "endpoint_ref", "type")
		return
	}
	if n, ok := h.redriveRef(w, r, store.RedriveParams{}, ref, req.EndpointRef != nil, "the request is not valid"); ok {
		writeJSON(w, http.StatusOK, redrivenJSON{Redriven: n})
	}
}

// redriveRef redrives p, narrowed to the endpoint ref names if the
// request named one, and reports how many deliveries it redrove; a bad
// ref (an empty one included: only a request that names no endpoint
// redrives every endpoint's) or a failed store call is answered (detail
// says what was invalid) and reported as !ok.
func (h *Handler) redriveRef(w http.ResponseWriter, r *http.Request, p store.RedriveParams, ref string, named bool, detail string) (int, bool) {
	if named {
		if !endpoint.IsRef(ref) {
			invalid(w, detail, "endpoint_ref", "ref")
			return 0, false
		}
		url, err := h.resolve(r, ref)
		if err != nil {
			h.storeError(w, r, err)
			return 0, false
		}
		p.Endpoint = url
	}
	n, err := h.redrive(r, p)
	if err != nil {
		h.storeErrorAfter(w, r, err, doneBefore(n, "moved back to pending", "moved"))
		return 0, false
	}
	return n, true
}

// resolve turns an endpoint ref back into the endpoint's URL: CodeNotFound
// (404) for a ref the store does not know.
func (h *Handler) resolve(r *http.Request, ref string) (string, error) {
	url, err := h.cfg.Store.Endpoints.Resolve(r.Context(), ref)
	if errors.Is(err, courier.CodeNotFound) {
		return "", &coded.Error{Code: courier.CodeNotFound, Msg: "no endpoint with this ref"}
	}
	return url, err
}

// redrive moves failed deliveries, and quarantined payload_unreadable
// ones, back to pending (store.Outbox.Redrive). For one delivery, one
// Redrive does not take is CodeNotFound, as cancel's is, its message
// saying why (notRedriven), and so is a missing one. A redrive an error ended
// returns how many it moved before, with the error: they stay moved.
func (h *Handler) redrive(r *http.Request, p store.RedriveParams) (int, error) {
	ctx := r.Context()
	n, err := h.cfg.Store.Outbox.Redrive(ctx, p)
	if err == nil && n == 0 && p.ID != 0 {
		d, err := h.get(ctx, p.ID)
		if err != nil {
			return 0, err
		}
		return 0, notRedriven(d, p.Endpoint)
	}
	if err != nil && n == 0 {
		return 0, err
	}
	attrs := []any{slog.Int(logkey.Count, n)}
	if p.ID != 0 {
		attrs = append(attrs, slog.Int64(logkey.ID, p.ID))
	}
	if p.Endpoint != "" {
		attrs = append(attrs, slog.String(logkey.EndpointRef, endpoint.Ref(p.Endpoint)))
	}
	h.cfg.Logger.InfoContext(ctx, "admin: redrive", attrs...)
	return n, err
}

// apiCancelEndpoint cancels every delivery of the endpoint the body's
// endpoint_ref names that a cancel takes (opsjson.CancelEndpoint). The
// ref is required: unlike a redrive, a cancel of every endpoint's
// deliveries is no action an operator asks for.
func (h *Handler) apiCancelEndpoint(w http.ResponseWriter, r *http.Request) {
	var req cancelRequestJSON
	if !decodeOptionalJSON(w, r, &req) {
		return
	}
	var ref string
	switch {
	case req.EndpointRef == nil || string(req.EndpointRef) == "null":
		invalid(w, "the request is not valid", "endpoint_ref", "required")
		return
	case json.Unmarshal(req.EndpointRef, &ref) != nil:
		invalid(w, "the request is not valid", "endpoint_ref", "type")
		return
	case ref == "":
		invalid(w, "the request is not valid", "endpoint_ref", "required")
		return
	case !endpoint.IsRef(ref):
		invalid(w, "the request is not valid", "endpoint_ref", "ref")
		return
	}
	url, err := h.resolve(r, ref)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	n, err := opsjson.CancelEndpoint(r.Context(), h.cfg.Store, url)
	if n > 0 || err == nil {
		h.cfg.Logger.InfoContext(r.Context(), "admin: cancel", slog.Int(logkey.Count, n), slog.String(logkey.EndpointRef, ref))
	}
	if err != nil {
		h.storeErrorAfter(w, r, err, doneBefore(n, "cancelled", "cancelled"))
		return
	}
	writeJSON(w, http.StatusOK, cancelledJSON{Cancelled: n})
}

func (h *Handler) apiCancel(w http.ResponseWriter, r *http.Request) {
	if !noBody(w, r) {
		return
	}
	id, ok := deliveryID(w, r)
	if !ok {
		return
	}
	if err := h.cancel(r, id); err != nil {
		h.storeError(w, r, err)
		return
	}
	respond(h, w, r, opsjson.NewDelivery)(h.get(r.Context(), id))
}

// get reads delivery id without its payload (a page of it, by
// store.ListParams.ID): no answer shows a payload, which may be 4 MiB,
// and a sealed one would be opened too. An id List does not find is
// CodeNotFound.
func (h *Handler) get(ctx context.Context, id int64) (store.Delivery, error) {
	page, err := h.cfg.Store.Outbox.List(ctx, store.ListParams{ID: id, Limit: 1})
	switch {
	case err != nil:
		return store.Delivery{}, err
	case len(page.Deliveries) == 0:
		return store.Delivery{}, errNoSuchDelivery
	}
	return page.Deliveries[0], nil
}

// errNoSuchDelivery answers an id that names no delivery.
var errNoSuchDelivery = &coded.Error{Code: courier.CodeNotFound, Msg: "no such delivery"}

// notRedriven is the refusal of a redrive of one delivery, d, that
// Redrive did not take, saying why: it is at another endpoint than the
// one the redrive named (endpoint, "" for none), or in a state no redrive
// takes, or, failed or quarantined payload_unreadable, one Redrive leaves
// as it is (its 1,000 attempts made, or a command under another
// capabilities digest than its endpoint's pin).
func notRedriven(d store.Delivery, named string) error {
	var msg string
	switch {
	case named != "" && endpoint.Normalize(d.Endpoint) != endpoint.Normalize(named):
		msg = "no delivery with this id at the endpoint endpoint_ref names"
	case d.Redrivable():
		msg = "the delivery with this id is " + string(d.Status) + " but Redrive leaves it as it is: it has made the most attempts a delivery may make, or is a command under another capabilities digest than its endpoint's pin"
	default:
		msg = "no delivery with this id that can be redriven: failed, or quarantined payload_unreadable (it is " + string(d.Status) + ")"
	}
	return &coded.Error{Code: courier.CodeNotFound, Msg: msg}
}

// cancel withdraws a pending or retrying delivery, or settles a failed or
// quarantined one (store.Outbox.Cancel); any other is CodeNotFound, its
// message saying why, as a redrive's (notRedriven): there is no such
// delivery, or it is in a state no cancel takes.
func (h *Handler) cancel(r *http.Request, id int64) error {
	err := h.cfg.Store.Outbox.Cancel(r.Context(), id)
	if errors.Is(err, courier.CodeNotFound) {
		d, err := h.get(r.Context(), id)
		if err != nil {
			return err
		}
		return &coded.Error{Code: courier.CodeNotFound, Msg: "no delivery with this id that can be cancelled: pending, retrying, failed or quarantined (it is " + string(d.Status) + ")"}
	}
	if err != nil {
		return err
	}
	h.cfg.Logger.InfoContext(r.Context(), "admin: cancel", slog.Int64(logkey.ID, id))
	return nil
}

// The pages of GET /api/endpoints and GET /api/contracts, and of
// GET /api/deliveries (whose default is the store's).
const (
	refPage = 100  // entries in a page by default
	maxPage = 1000 // and at most
)

func (h *Handler) apiEndpoints(w http.ResponseWriter, r *http.Request) {
	list := h.lists().EndpointPage
	if page, next, ok := pageByURL(h, w, r, list, toEndpoint, func(e endpointJSON) string { return e.Ref }); ok {
		writeJSON(w, http.StatusOK, endpointPageJSON{Endpoints: page, NextAfter: next})
	}
}

// lists are the store's reads of its endpoints and pins a page at a time
// (package internal/listing).
func (h *Handler) lists() listing.Lists[store.EndpointHealth, store.Contract] {
	return listing.For[store.EndpointHealth, store.Contract](h.cfg.Store)
}

// pageByURL answers the query of r, a list one entry per endpoint that
// page reads from the store by URL, converted by to: the page and the
// next one's cursor, the ref (ref says which) of the last entry when more
// follow, or false when it answered a bad query or the store's failure
// itself. An outbox may keep tens of thousands of endpoints (disabled ones
// stay until an operator acts, contract pins for good), too many for one
// answer, or for one read: the store reads the page from its indexes from
// the cursor's endpoint on. The cursor is a ref, not a URL, so that it
// says nothing of one (it travels in a query, which logs keep); the Store
// remembers the URL of each it hands out (see store.Endpoints.Resolve), so
// that it holds when its endpoint leaves the list. Another process, or
// one that has forgotten it, searches the endpoints the store knows for
// it; one the store no longer knows at all is 404 not_found: start again
// from the first page.
func pageByURL[T, J any](h *Handler, w http.ResponseWriter, r *http.Request,
	page func(ctx context.Context, after string, limit int) ([]T, bool, error), to func(T) J, ref func(J) string) ([]J, string, bool) {
	after, limit, ok := refPageParams(w, r)
	if !ok {
		return nil, "", false
	}
	if after != "" {
		url, err := h.resolve(r, after)
		if err != nil {
			h.storeError(w, r, err)
			return nil, "", false
		}
		after = url
	}
	rows, more, err := page(r.Context(), after, limit)
	if err != nil {
		h.storeError(w, r, err)
		return nil, "", false
	}
	out, next := each(rows, to), ""
	if more && len(out) > 0 {
		next = ref(out[len(out)-1])
	}
	return out, next, true
}

// refPageParams reads the query of a list paged by pageByURL: after (the
// next_after of the previous page) and limit, given at most once each,
// and no other parameter (only). It answers a bad query itself, naming
// every bad field.
func refPageParams(w http.ResponseWriter, r *http.Request) (after string, limit int, ok bool) {
	qr := &queryReader{q: r.URL.Query()}
	if qr.only("after", "limit") {
		if after = qr.q.Get("after"); after != "" && !endpoint.IsRef(after) {
			qr.bad("after", "ref")
		}
		limit = qr.limit(refPage)
	}
	if len(qr.fields) > 0 {
		invalidQuery(w, qr.fields)
		return "", 0, false
	}
	return after, limit, true
}

// queryReader reads a list's query, gathering every bad field.
type queryReader struct {
	q      url.Values
	fields []ack.FieldError
}

func (r *queryReader) bad(field, rule string) {
	r.fields = append(r.fields, ack.FieldError{Field: field, Rule: rule})
}

// only reports whether the query names only parameters of names, each at
// most once, as a form's fields are read: it refuses every other
// parameter (rule unknown), for a filter misspelled would list every
// delivery as if it had been applied, and every one given more than once
// (rule single), for which value counts would depend on who reads the
// query.
func (r *queryReader) only(names ...string) bool {
	ok := true
	for _, name := range slices.Sorted(maps.Keys(r.q)) {
		switch {
		case !slices.Contains(names, name):
			r.bad(name, "unknown")
			ok = false
		case len(r.q[name]) > 1:
			r.bad(name, "single")
			ok = false
		}
	}
	return ok
}

// limit reads limit, 1 to maxPage (rule range), or returns def when
// the query has none.
func (r *queryReader) limit(def int) int {
	v := r.q.Get("limit")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPage {
		r.bad("limit", "range")
	}
	return n
}

// invalidQuery answers 400 validation_failed naming every bad field of
// the query.
func invalidQuery(w http.ResponseWriter, fields []ack.FieldError) {
	p := problem.New(http.StatusBadRequest, courier.CodeValidation, "the query is not valid")
	p.Errors = fields
	problem.Write(w, p)
}

// apiEndpoint serves an action on the endpoint the path's {ref} names,
// answering the endpoint's state afterwards.
func (h *Handler) apiEndpoint(action string, act endpointAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !noBody(w, r) {
			return
		}
		target, ok := h.pathEndpoint(w, r)
		if !ok {
			return
		}
		if err := h.endpointAct(r, action, act, target); err != nil {
			h.storeError(w, r, err)
			return
		}
		respond(h, w, r, toEndpoint)(h.cfg.Store.Endpoints.Get(r.Context(), target))
	}
}

// apiBlockedKeys lists the ordering keys a failed delivery holds at the
// endpoint the path's {ref} names, each with that delivery: the one to
// redrive or cancel so that the deliveries behind it go.
func (h *Handler) apiBlockedKeys(w http.ResponseWriter, r *http.Request) {
	target, ok := h.pathEndpoint(w, r)
	if !ok {
		return
	}
	keys, err := h.cfg.Store.Endpoints.BlockedKeys(r.Context(), target, maxPage)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	out := blockedKeysJSON{BlockedKeys: make([]blockedKeyJSON, len(keys))}
	for i, k := range keys {
		out.BlockedKeys[i] = blockedKeyJSON{Head: k.Head, OrderingKey: k.OrderingKey, Since: opsjson.UTC(k.Since)}
	}
	writeJSON(w, http.StatusOK, out)
}

// apiLimits sets the limits of the endpoint the path's {ref} names,
// answering the endpoint afterwards.
func (h *Handler) apiLimits(w http.ResponseWriter, r *http.Request) {
	var req limitsRequestJSON
	if !decodeJSON(w, r, &req) {
		return
	}
	target, ok := h.pathEndpoint(w, r)
	if !ok {
		return
	}
	l := req.limits()
	if err := h.cfg.Store.Endpoints.SetLimits(r.Context(), target, l); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.cfg.Logger.InfoContext(r.Context(), "admin: endpoint", slog.String(logkey.Action, "limits"), slog.String(logkey.EndpointRef, endpoint.Ref(target)),
		slog.Int(logkey.MaxInFlight, l.MaxInFlight), slog.Float64(logkey.Rate, l.Rate), slog.Int(logkey.Burst, l.Burst))
	respond(h, w, r, toEndpoint)(h.cfg.Store.Endpoints.Get(r.Context(), target))
}

// endpointAct runs an action on an endpoint and logs it, by ref.
func (h *Handler) endpointAct(r *http.Request, action string, act endpointAction, url string) error {
	if err := act(r.Context(), url); err != nil {
		return err
	}
	h.cfg.Logger.InfoContext(r.Context(), "admin: endpoint", slog.String(logkey.Action, action), slog.String(logkey.EndpointRef, endpoint.Ref(url)))
	return nil
}

// invalid answers 400 validation_failed naming the field and the rule it
// broke.
func invalid(w http.ResponseWriter, detail, field, rule string) {
	p := problem.New(http.StatusBadRequest, courier.CodeValidation, detail)
	p.Errors = []ack.FieldError{{Field: field, Rule: rule}}
	problem.Write(w, p)
}
