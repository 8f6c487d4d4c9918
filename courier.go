package courier

// Status is the state of one delivery in the outbox.
//
//	pending --claim--> leased --2xx + valid ack--> succeeded
//	                     |--retryable--> retry_wait --due--> leased
//	                     |--permanent, budget or deadline spent--> failed
//	                     |--subscription changed/paused--> suppressed
//	                     |--payload unreadable or digest mismatch--> quarantined
//	                     '--lease expired (its worker died)--> retry_wait or failed
//
// An operator's Cancel (package store) ends a waiting, failed or
// quarantined delivery suppressed, and Redrive moves a failed one, or one
// quarantined payload_unreadable, back to pending. The application's
// Publish of an event again moves its delivery suppressed
// subscription_changed back to pending.
type Status string

// The delivery statuses.
const (
	StatusPending     Status = "pending"
	StatusLeased      Status = "leased"
	StatusRetryWait   Status = "retry_wait"
	StatusSucceeded   Status = "succeeded"
	StatusFailed      Status = "failed"
	StatusSuppressed  Status = "suppressed"
	StatusQuarantined Status = "quarantined"
)

// Statuses returns every status, in state-machine order; a Status value
// not among them is none.
func Statuses() []Status {
	return []Status{
		StatusPending, StatusLeased, StatusRetryWait, StatusSucceeded,
		StatusFailed, StatusSuppressed, StatusQuarantined,
	}
}

// Final reports whether no further attempt will be made in status s:
// succeeded, failed, suppressed or quarantined. Only an operator's
// Redrive (package store) takes a failed delivery, or one quarantined
// payload_unreadable, out of it, and only a Publish of its event again
// one suppressed subscription_changed.
func (s Status) Final() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusSuppressed, StatusQuarantined:
		return true
	}
	return false
}
