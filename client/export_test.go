package client

// SetAwaiting has f called each time a Run of w begins to wait for room,
// a wake-up or its next poll. Set it before w runs.
func SetAwaiting(w *Worker, f func()) { w.awaiting = f }

// SetClaimed has f called after each claim a Run of w makes, with how many
// deliveries it leased. Set it before w runs.
func SetClaimed(w *Worker, f func(leased int)) { w.claimed = f }

// SetClaimBegan has f called as each transaction of w's claims begins,
// before w reads its clock for it. Set it before w runs.
func SetClaimBegan(w *Worker, f func()) { w.claimBegan = f }
