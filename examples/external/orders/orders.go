// Package orders is the sending service: paying an order writes the order
// and enqueues its notification to shipping in one transaction.
package orders

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/courier-go/courier/store"
)

// Schema is the service's own table, beside courier's in its database.
const Schema = `CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`

// Service is the orders API.
type Service struct {
	Store    *store.Store
	Shipping string // the shipping service's notification endpoint
}

// Pay records order id as paid and enqueues its notification, both or
// neither.
func (s *Service) Pay(ctx context.Context, id string, total int) error {
	tx, err := s.Store.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, tx.Rebind("INSERT INTO orders (id, total) VALUES (?, ?)"), id, total); err != nil {
		return err
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
// on a pattern that names {id}.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Total int `json:"total"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Total < 1 {
		http.Error(w, "total required", http.StatusBadRequest)
		return
	}
	if err := s.Pay(r.Context(), r.PathValue("id"), req.Total); err != nil {
		http.Error(w, "could not pay", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
