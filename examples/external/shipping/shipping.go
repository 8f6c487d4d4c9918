// Package shipping is the receiving service: it ships each paid order
// once, however often the notification arrives.
package shipping

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// OrderPaid is the notification the orders service sends.
type OrderPaid struct {
	NotificationID string `json:"notification_id" validate:"required,courier_token"`
	OrderID        string `json:"order_id" validate:"required,courier_token"`
	Total          int    `json:"total" validate:"min=1"`
}

// DedupeKey is the notification's identity: the receiver applies each
// once.
func (o OrderPaid) DedupeKey() string { return o.NotificationID }

// Schema is the service's own table, beside courier's in its database.
const Schema = `CREATE TABLE IF NOT EXISTS shipments (order_id TEXT PRIMARY KEY, total INTEGER NOT NULL)`

// Handler returns the service's notification endpoint: courier's receiver,
// whose function writes the shipment in the transaction that records the
// notification. The receiver logs to logger what it refuses (at Info)
// and what fails (at Error), never a notification's content; given a nil
// logger, the receiver passes its Warn and Error lines alone (what fails)
// to slog.Default().
func Handler(s *store.Store, v signature.Verifier, logger *slog.Logger) (http.Handler, error) {
	return handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: v, Logger: logger},
		func(ctx context.Context, tx *sqlx.Tx, n OrderPaid) error {
			_, err := tx.ExecContext(ctx, tx.Rebind("INSERT INTO shipments (order_id, total) VALUES (?, ?)"), n.OrderID, n.Total)
			return err
		})
}
