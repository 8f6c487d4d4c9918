package opsjson

import (
	"context"
	"errors"
	"math"

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
		before := first
		for {
			page, err := s.Outbox.List(ctx, store.ListParams{Endpoint: url, Status: status, Before: before, Limit: cancelPage})
			if err != nil {
				return n, err
			}
			for _, d := range page.Deliveries {
				switch err := s.Outbox.Cancel(ctx, d.ID); {
				case err == nil:
					n++
				case !errors.Is(err, courier.CodeNotFound): // not claimed or finished meanwhile
					return n, err
				}
			}
			if page.NextBefore == 0 {
				break
			}
			before = page.NextBefore
		}
	}
	return n, nil
}
