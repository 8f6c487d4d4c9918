package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// RefuseFunc installs, in db, a rule of the database's own (a trigger)
// that refuses every insert, update and delete of table.
type RefuseFunc func(t *testing.T, db *sqlx.DB, table string)

// RefusedWrites checks which code an operator's operation answers when a
// rule of the database's own refuses its write. One whose rows the
// caller's input does not shape (Enable and Disable name an endpoint,
// FailMismatched an endpoint whose deliveries it fails) is
// internal_error, as Redrive and Cancel are: no other input would pass
// the rule. One that writes what the caller gave (Pin's digest,
// SetLimits' limits, Update's settings) stays invalid_argument.
func RefusedWrites(t *testing.T, open OpenFunc, refuse RefuseFunc) {
	const hook = "https://r.example/hooks"
	for _, tc := range []struct {
		name  string
		table string
		query string // the refused query, which the error names
		want  courier.Code
		ready func(t *testing.T, b *bundle)       // before the rule
		write func(t *testing.T, b *bundle) error // refused by it
	}{
		{"Disable", "courier_endpoints", "endpoint_put", courier.CodeInternal, nil,
			func(t *testing.T, b *bundle) error { return b.store.Endpoints.Disable(b.ctx, hook) }},
		{"Enable", "courier_endpoints", "endpoint_delete", courier.CodeInternal,
			func(t *testing.T, b *bundle) {
				if err := b.store.Endpoints.Disable(b.ctx, hook); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, b *bundle) error { return b.store.Endpoints.Enable(b.ctx, hook) }},
		{"FailMismatched", "courier_outbox", "contract_fail_mismatched", courier.CodeInternal,
			func(t *testing.T, b *bundle) {
				b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r1", digestA, 5, `{}`)})
				if err := b.store.Contracts.Pin(b.ctx, sourceEndpoint, digestB); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, b *bundle) error {
				n, err := b.store.Contracts.FailMismatched(b.ctx, sourceEndpoint)
				if n != 0 {
					t.Errorf("FailMismatched refused reported %d failed", n)
				}
				return err
			}},
		{"Pin", "courier_contracts", "contract_pin", courier.CodeInvalidArgument, nil,
			func(t *testing.T, b *bundle) error { return b.store.Contracts.Pin(b.ctx, sourceEndpoint, digestA) }},
		{"SetLimits", "courier_endpoint_limits", "endpoint_limits_put", courier.CodeInvalidArgument, nil,
			func(t *testing.T, b *bundle) error {
				return b.store.Endpoints.SetLimits(b.ctx, hook, store.Limits{Rate: 1})
			}},
		{"Update", "courier_subscriptions", "subscription_update", courier.CodeInvalidArgument,
			func(t *testing.T, b *bundle) {
				if _, err := b.store.Subscriptions.Create(b.ctx, nil, subscription("acme", hook, "key-1", "*")); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, b *bundle) error {
				p := subscription("acme", hook, "key-1", "*")
				p.Paused = true
				subs, err := b.store.Subscriptions.List(b.ctx, "acme")
				if err != nil || len(subs) != 1 {
					t.Fatalf("subscriptions: %d, %v", len(subs), err)
				}
				_, err = b.store.Subscriptions.Update(b.ctx, nil, subs[0].ID, p)
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, open, store.Config{})
			if tc.ready != nil {
				tc.ready(t, b)
			}
			refuse(t, b.db, tc.table)
			err := tc.write(t, b)
			if courier.CodeOf(err) != tc.want || !strings.Contains(fmt.Sprint(err), "store: "+tc.query+": "+string(tc.want)+": ") {
				t.Errorf("%s refused by the database = %v; want %s, naming %s", tc.name, err, tc.want, tc.query)
			}
		})
	}
}

// UnpinSkipped checks Unpin of a pin that holds nothing back, when a rule
// of the database's own, installed by skip (SQLite's RAISE(IGNORE),
// PostgreSQL's BEFORE DELETE trigger returning NULL), skips the delete
// without an error: Unpin is internal_error, after a bounded number of
// tries, and the pin stays. It looped for as long as its context lasted.
func UnpinSkipped(t *testing.T, open OpenFunc, skip func(t *testing.T, db *sqlx.DB)) {
	b := setup(t, open, store.Config{})
	const hook = "https://r.example/hooks"
	digest := strings.Repeat("a", 64)
	if err := b.store.Contracts.Pin(b.ctx, hook, digest); err != nil {
		t.Fatal(err)
	}
	skip(t, b.db)
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute) // a loop fails the test, not the suite's timeout
	defer cancel()
	if err := b.store.Contracts.Unpin(ctx, hook); courier.CodeOf(err) != courier.CodeInternal {
		t.Fatalf("Unpin of a pin whose delete the database skips = %v, want internal_error", err)
	}
	if c, err := b.store.Contracts.Get(b.ctx, hook); err != nil || c.CapabilitiesSHA256 != digest {
		t.Fatalf("the pin after the skipped Unpin = %+v, %v; want it as pinned", c, err)
	}
}
