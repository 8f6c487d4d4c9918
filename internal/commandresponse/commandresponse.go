// Package commandresponse builds a source's answer to a command
// (ack.CommandResponse), as handler.NewSource writes it and the tests of
// the sender's side forge it.
package commandresponse

import (
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/wire"
)

// For returns the response a source answers c, received as body at
// attempt, with status (ack.CommandApplied or ack.CommandAlreadyApplied).
func For(c ack.Command, body []byte, attempt int, status string) ack.CommandResponse {
	return ack.CommandResponse{
		Schema: wire.CommandResponseSchema, Operation: c.Operation, RequestID: c.RequestID,
		PayloadSHA256: ack.Digest(body), CapabilitiesSHA256: c.CapabilitiesSHA256, Status: status,
		Attempt: attempt, SourceMaxAttempts: c.SourceMaxAttempts,
	}
}

// Bytes returns r as a source writes it, stores and replays it for every
// redelivery: its canonical JSON.
func Bytes(r ack.CommandResponse) []byte {
	b, err := canonical.Marshal(r)
	if err != nil {
		panic(err) // strings and integers only: cannot fail
	}
	return b
}
