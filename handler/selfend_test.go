package handler_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
)

// TestAFunctionThatEndsItsTransactionHasFailed: a function must leave its
// transaction's commit or rollback to the receiver; one that ends tx
// itself has failed (500 handler_failed), not the store (503, which it
// was answered before). One that commits tx itself commits its effects
// with the Inbox record of a Receiver or a Source, so the redelivery is
// answered from the record without the function running again; a Source
// stores its response in a transaction of its own and answers it at once
// (before, its record stayed processing and every redelivery was answered
// 503 in_progress, for good). A Reporting receiver completes its claim
// after the function, so there, as its doc says, the retry runs the
// function again. One that rolls tx back itself has written nothing, and
// the redelivery runs it again.
func TestAFunctionThatEndsItsTransactionHasFailed(t *testing.T) {
	t.Parallel()
	ends := []struct {
		name  string
		end   func(tx *sqlx.Tx) error
		first func(target anyReceiver, ok int) (int, courier.Code)
		calls int32
	}{
		{"commit", (*sqlx.Tx).Commit, func(target anyReceiver, ok int) (int, courier.Code) {
			if target.name == "Source" {
				return ok, ""
			}
			return http.StatusInternalServerError, courier.CodeHandlerFailed
		}, 1},
		{"rollback", (*sqlx.Tx).Rollback, func(anyReceiver, int) (int, courier.Code) {
			return http.StatusInternalServerError, courier.CodeHandlerFailed
		}, 2},
	}
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		for _, end := range ends {
			t.Run(end.name, func(t *testing.T) {
				var ended atomic.Bool // the first call only
				e := target.open(t, anyOptions{appTx: func(_ context.Context, tx *sqlx.Tx) error {
					if ended.CompareAndSwap(false, true) {
						return end.end(tx)
					}
					return nil
				}})
				rec := serve(e.handler, e.request(t))
				status, code := end.first(target, e.ok)
				if rec.Code != status || (code != "" && problemOf(t, rec).Code != code) {
					t.Fatalf("the function ended its transaction (%s): answered %d %s, want %d %s", end.name, rec.Code, rec.Body, status, code)
				}
				if rec = serve(e.handler, e.request(t)); rec.Code != e.ok {
					t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
				}
				var processing int
				if err := e.store.DB().Get(&processing, "SELECT COUNT(*) FROM courier_inbox WHERE status <> 'completed'"); err != nil {
					t.Fatal(err)
				}
				calls := end.calls
				if target.name == "Reporting" {
					calls = 2 // its claim completes after the function
				}
				if inbox, _ := e.written(t); inbox != 1 || processing != 0 || e.calls.Load() != calls {
					t.Fatalf("%d inbox records (%d not completed) after %d calls; want 1 completed after %d", inbox, processing, e.calls.Load(), calls)
				}
			})
		}
	})
}
