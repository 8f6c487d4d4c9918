package opsjson

import (
	"context"
	"errors"
	"math"
	"slices"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/store"
)

// cancelPage is how many deliveries CancelEndpoint reads at a time, the
// most a page of store.Outbox.List holds.
const cancelPage = 1000

// cancellable are the statuses store.Outbox.Cancel takes, in the order
// CancelEndpoint cancels them: what waits to be sent, then what an
// operator has yet to settle.
var cancellable = []courier.Status{courier.StatusPending, courier.StatusRetryWait, courier.StatusFailed, courier.StatusQuarantined}

// CancelEndpoint cancels the deliveries of the endpoint url that
// store.Outbox.Cancel takes (pending, retry_wait, failed, quarantined),
// one at a time: what an operator does for a receiver gone for good, so
// that its deliveries stop holding the outbox's health blocked. Each is
// Cancel's own, so each frees the ordering key it may hold as Cancel
// does. It reads them a page of each status at a time by
// store.Outbox.List, and only those whose id is at or below the
// endpoint's newest when it began, so that it ends however fast
// deliveries arrive: one enqueued to the endpoint while it runs may be
// left, and so may one that comes to a status it takes after it has read
// that status's ids (a leased delivery that then fails). One a worker
// claimed or that finished since its page was read (Cancel answers
// CodeNotFound) is skipped.
//
// It returns how many it cancelled. An error (ctx's end included) ends it
// with how many it cancelled before, which stay cancelled: cancelling
// again takes the rest. An empty url is CodeInvalidArgument: it would
// name every endpoint.
func CancelEndpoint(ctx context.Context, s *store.Store, url string) (int, error) {
	return cancelEach(ctx, s, url, s.Outbox.Cancel)
}

// CountCancellable counts what CancelEndpoint would cancel, reading the
// same pages and cancelling none: a dry run. It differs from the cancel
// that follows by what changes meanwhile (a delivery enqueued, claimed,
// finished or failed since).
func CountCancellable(ctx context.Context, s *store.Store, url string) (int, error) {
	return cancelEach(ctx, s, url, func(context.Context, int64) error { return nil })
}

// Cancellable reports whether store.Outbox.Cancel takes a delivery in
// status.
func Cancellable(status courier.Status) bool { return slices.Contains(cancellable, status) }

// cancelEach is CancelEndpoint, cancelling each delivery it reads by
// cancel.
func cancelEach(ctx context.Context, s *store.Store, url string, cancel func(context.Context, int64) error) (int, error) {
	if url == "" {
		return 0, &coded.Error{Code: courier.CodeInvalidArgument, Msg: "an endpoint to cancel the deliveries of is required"}
	}
	newest, err := s.Outbox.List(ctx, store.ListParams{Endpoint: url, Limit: 1})
	if err != nil || len(newest.Deliveries) == 0 {
		return 0, err
	}
	first := newest.Deliveries[0].ID + 1 // ids below it: the newest's and older
	if newest.Deliveries[0].ID == math.MaxInt64 {
		first = 0 // every id is at or below it
	}
	n := 0
	for _, status := range cancellable {
		err := EachDelivery(ctx, s, store.ListParams{Endpoint: url, Status: status, Before: first}, func(d store.Delivery) error {
			switch err := cancel(ctx, d.ID); {
			case err == nil:
				n++
			case !errors.Is(err, courier.CodeNotFound): // not claimed or finished meanwhile
				return err
			}
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// EachDelivery calls f with each delivery p lists, newest first, reading
// a page of cancelPage at a time from p.Before (p.Limit is not read),
// until the last page or f's first error, which it returns.
func EachDelivery(ctx context.Context, s *store.Store, p store.ListParams, f func(store.Delivery) error) error {
	p.Limit = cancelPage
	for {
		page, err := s.Outbox.List(ctx, p)
		if err != nil {
			return err
		}
		for _, d := range page.Deliveries {
			if err := f(d); err != nil {
				return err
			}
		}
		if page.NextBefore == 0 {
			return nil
		}
		p.Before = page.NextBefore
	}
}
