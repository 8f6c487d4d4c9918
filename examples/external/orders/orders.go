// Package orders is the sending service: paying an order writes the order
// and enqueues its notification to shipping in one transaction.
package orders

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/store"
)

// Schema is the service's own table, beside courier's in its database.
const Schema = `CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`

// ErrAlreadyPaid is Pay's error for an order paid before: nothing is
// written, and nothing enqueued.
var ErrAlreadyPaid = errors.New("orders: order already paid")

// CodeAlreadyPaid is the stable code ServeHTTP answers a second payment
// for an order with (409), for clients to act on.
const CodeAlreadyPaid courier.Code = "order_already_paid"

// maxBodyBytes bounds the body ServeHTTP reads: {"total": N} is a few
// bytes, and a larger body is answered 413 body_too_large unread.
const maxBodyBytes = 4 << 10

// orderID is what an order id may be: a courier token (as shipping
// validates order_id) short enough that "order-<id>-paid", its
// notification id, is one too.
var orderID = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,245}$`)

// Service is the orders API.
type Service struct {
	Store    *store.Store
	Shipping string // the shipping service's notification endpoint
	// Logger receives the failures ServeHTTP answers 500, with their
	// error. Defaults to slog.Default().
	Logger *slog.Logger
}

// Pay records order id as paid and enqueues its notification, both or
// neither. An order paid before is ErrAlreadyPaid.
func (s *Service) Pay(ctx context.Context, id string, total int) error {
	tx, err := s.Store.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// ON CONFLICT DO NOTHING, on both engines: a second payment finds the
	// row (on PostgreSQL after the first payment's transaction commits)
	// and writes nothing, instead of failing with the driver's own error.
	res, err := tx.ExecContext(ctx, tx.Rebind("INSERT INTO orders (id, total) VALUES (?, ?) ON CONFLICT (id) DO NOTHING"), id, total)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return ErrAlreadyPaid
	}
	payload, err := json.Marshal(map[string]any{"notification_id": "order-" + id + "-paid", "order_id": id, "total": total})
	if err != nil {
		return err
	}
	if _, err := s.Store.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
		NotificationID: "order-" + id + "-paid", Endpoint: s.Shipping, Payload: payload,
	}); err != nil {
		return err
	}
	return tx.Commit()
}

// ServeHTTP handles POST /orders/{id}/pay, its body {"total": N}; mount it
// on a pattern that names {id}. It answers 202 once the order is paid,
// and refuses with an RFC 9457 application/problem+json body whose code
// is stable:
//
//	413 body_too_large      the body is over 4 KiB (408, 503 and 400
//	                        as middleware.ReadBody answers a body it cannot read)
//	400 malformed_json      the body is not a JSON object
//	400 validation_failed   id is not 1-245 of A-Z a-z 0-9 _ . : -, or total
//	                        is not a positive integer
//	409 order_already_paid  the order was paid before (CodeAlreadyPaid)
//	500 internal_error      the payment failed (logged)
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !orderID.MatchString(id) {
		problem(w, http.StatusBadRequest, courier.CodeValidation, "id must be 1-245 of A-Z a-z 0-9 _ . : -")
		return
	}
	body, ok := middleware.ReadBody(w, r, middleware.BodyLimits{MaxBytes: maxBodyBytes})
	if !ok {
		return // answered: 413, 408, 503 or 400
	}
	var req struct {
		Total int `json:"total"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		if typeErr := (*json.UnmarshalTypeError)(nil); errors.As(err, &typeErr) && typeErr.Field == "total" {
			problem(w, http.StatusBadRequest, courier.CodeValidation, "total must be a positive integer")
			return
		}
		problem(w, http.StatusBadRequest, courier.CodeMalformedJSON, `the body must be a JSON object: {"total": N}`)
		return
	}
	if req.Total < 1 {
		problem(w, http.StatusBadRequest, courier.CodeValidation, "total must be a positive integer")
		return
	}
	switch err := s.Pay(r.Context(), id, req.Total); {
	case errors.Is(err, ErrAlreadyPaid):
		problem(w, http.StatusConflict, CodeAlreadyPaid, "the order was paid before")
	case err != nil:
		logger := s.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.ErrorContext(r.Context(), "orders: payment failed", slog.String("order", id),
			slog.String("code", string(courier.CodeOf(err))), slog.Any("error", err))
		problem(w, http.StatusInternalServerError, courier.CodeInternal, "the payment failed")
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

// problem answers an RFC 9457 problem details document, as courier's
// handlers do: the status, a stable code and a detail that holds none of
// the request's content.
func problem(w http.ResponseWriter, status int, code courier.Code, detail string) {
	b, err := json.Marshal(struct {
		Type   string       `json:"type"`
		Title  string       `json:"title"`
		Status int          `json:"status"`
		Code   courier.Code `json:"code"`
		Detail string       `json:"detail"`
	}{"about:blank", http.StatusText(status), status, code, detail})
	if err != nil { // a struct of strings always marshals
		http.Error(w, http.StatusText(status), status)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
