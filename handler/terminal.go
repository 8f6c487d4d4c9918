package handler

import "github.com/courier-go/courier/ack"

// Terminal is the receiver for terminal notifications (the terminal
// profile of package ack): strict members, validated, answered with the
// terminal Ack. As the reference system does, it keys them by event_id
// and judges them by their canonical JSON: the same notification
// serialized another way (whitespace, member order, escapes) is a
// redelivery, answered 200 with the stored Ack; another notification for
// an event already accepted from the same sender is 409
// idempotency_collision, and nothing is applied.
type Terminal = Receiver[ack.Terminal]

// NewTerminal returns a Terminal receiver that runs fn once per terminal
// notification.
func NewTerminal(cfg ReceiverConfig, fn Func[ack.Terminal]) (*Terminal, error) {
	return NewReceiver(cfg, fn)
}
