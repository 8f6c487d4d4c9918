package handler

import "github.com/courier-go/courier/ack"

// Terminal is the receiver for terminal notifications (the terminal
// profile of package ack): strict members, validated, deduped by
// notification_id, answered with the terminal Ack.
type Terminal = Receiver[ack.Terminal]

// NewTerminal returns a Terminal receiver that runs fn once per terminal
// notification.
func NewTerminal(cfg ReceiverConfig, fn Func[ack.Terminal]) (*Terminal, error) {
	return NewReceiver(cfg, fn)
}
