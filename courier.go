package courier

// Status is the state of one delivery in the outbox.
//
//	pending --claim--> leased --2xx + valid ack--> succeeded
//	                     |--retryable--> retry_wait --due--> leased
//	                     |--permanent--> failed
//	                     |--subscription changed/paused--> suppressed
//	                     '--payload unreadable or digest mismatch--> quarantined
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

// Final reports whether no further attempt will be made in status s.
func (s Status) Final() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusSuppressed, StatusQuarantined:
		return true
	}
	return false
}
