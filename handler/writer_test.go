package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/store"
)

// TestReceiversRunTheFunctionWithTheWriterHeld: a write through the
// Store's DB() inside a receiver's function waited for SQLite's busy
// timeout and then answered 500. Every receiver now passes its function a
// context marked as holding the writer (internal/writerctx), which the
// SQLite engine reads to fail such a write at once; the request's own
// context is not marked.
func TestReceiversRunTheFunctionWithTheWriterHeld(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		errNotHeld := errors.New("the function's context is not marked")
		e := target.open(t, anyOptions{app: func(ctx context.Context) error {
			if !writerctx.Held(ctx) {
				return errNotHeld
			}
			return nil
		}})
		req := e.request(t)
		if writerctx.Held(req.Context()) {
			t.Fatal("the request's context is marked before the receiver runs")
		}
		if rec := serve(e.handler, req); rec.Code != e.ok || e.calls.Load() != 1 {
			t.Fatalf("got %d after %d calls, want %d after 1: %s", rec.Code, e.calls.Load(), e.ok, rec.Body)
		}
	})
}

// TestStoreWritesInTheFunctionFailAtOnce: a Store method that writes (in
// a transaction of its own, or in a statement on the writer), or
// Store.Begin, given the function's context waited for the writer the
// request itself holds, until the context ended. Each now fails at once
// with code write_outside_transaction, and the function's error answers
// 500 handler_failed; a read through the Store goes on.
func TestStoreWritesInTheFunctionFailAtOnce(t *testing.T) {
	t.Parallel()
	writes := map[string]func(ctx context.Context, s *store.Store) error{
		"Begin": func(ctx context.Context, s *store.Store) error {
			tx, err := s.Begin(ctx)
			if err == nil {
				tx.Rollback()
			}
			return err
		},
		"Endpoints.Disable": func(ctx context.Context, s *store.Store) error {
			return s.Endpoints.Disable(ctx, "https://r.example/h")
		},
		"Endpoints.SetLimits": func(ctx context.Context, s *store.Store) error {
			return s.Endpoints.SetLimits(ctx, "https://r.example/h", store.Limits{MaxInFlight: 1})
		},
		"Subscriptions.Create without a transaction": func(ctx context.Context, s *store.Store) error {
			_, err := s.Subscriptions.Create(ctx, nil, store.SubscriptionParams{Tenant: "acme", Endpoint: "https://r.example/h",
				EventTypes: []string{"order.paid"}, KeyID: "k1"})
			return err
		},
	}
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		for name, write := range writes {
			t.Run(name, func(t *testing.T) {
				var s *store.Store // set before the request
				var got error
				e := target.open(t, anyOptions{app: func(ctx context.Context) error {
					// Bounds the wait for the writer, should there be one.
					ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					if _, err := s.Subscriptions.List(ctx, "acme"); err != nil {
						return fmt.Errorf("read through the Store: %w", err)
					}
					got = write(ctx, s)
					return got
				}})
				s = e.store
				rec := serve(e.handler, e.request(t))
				if courier.CodeOf(got) != courier.CodeWriteOutsideTransaction {
					t.Fatalf("%s in the function: %v, want code write_outside_transaction", name, got)
				}
				if p := problemOf(t, rec); rec.Code != http.StatusInternalServerError || p.Code != courier.CodeHandlerFailed {
					t.Fatalf("answered %d %q, want 500 handler_failed", rec.Code, p.Code)
				}
			})
		}
	})
}
