package middleware

import (
	"context"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/logdefault"
	"github.com/courier-go/courier/signature"
)

// contextKey keys the values this package puts in a request's context.
type contextKey int

const (
	principalKey contextKey = iota
	txKey
	loggerKey
)

// PrincipalFromContext returns who Verify found the request came from.
func PrincipalFromContext(ctx context.Context) (signature.Principal, bool) {
	p, ok := ctx.Value(principalKey).(signature.Principal)
	return p, ok
}

// TxFromContext returns the request's transaction begun by Transaction.
// Use it for the request's work; Transaction commits or rolls it back.
func TxFromContext(ctx context.Context) (*sqlx.Tx, bool) {
	tx, ok := ctx.Value(txKey).(*sqlx.Tx)
	return tx, ok && tx != nil
}

// loggerFrom returns the logger of the Recover serving ctx's request, for
// the middleware inside it (Transaction) to log what it answered for;
// without a Recover around it, slog.Default()'s, from Warn up (see
// Recover).
func loggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey).(*slog.Logger); ok {
		return l
	}
	return logdefault.Or(nil)
}
