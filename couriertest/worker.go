package couriertest

import (
	"context"

	"github.com/courier-go/courier/client"
)

// Drain runs w until no delivery is due: it calls w.Work until one call
// claims nothing, and returns how many deliveries were claimed in all.
// Retries wait out their backoff: a delivery whose retry is not due yet is
// not claimed (give the store a settable clock, or the worker a short
// backoff, to have Drain see retries through), nor is one to an endpoint
// whose circuit breaker the test's faults opened (see the package
// documentation). A claim goes on past the deliveries it ends rather than
// sends (past their deadline, of a paused subscription) to lease those
// behind them, up to about a thousand ended: Drain may return before a
// larger such backlog is through, and a test with one calls it again.
// Drain stops early when ctx is done or a claim fails.
//
// Neither the count nor a nil error says how the deliveries ended: one
// failed for good (a 4xx, an answer that does not verify against its
// profile, such as a 204 to the default profile) is not due either.
// A test asserts the outcome on the receiver's side (Effects), or on the
// sender's: the Store's Outbox.Health counts deliveries by status
// (courier.StatusSucceeded, courier.StatusFailed).
func Drain(ctx context.Context, w *client.Worker) (int, error) {
	total := 0
	for {
		n, err := w.Work(ctx)
		total += n
		switch {
		case err != nil:
			return total, err
		case n == 0:
			return total, nil
		}
	}
}
