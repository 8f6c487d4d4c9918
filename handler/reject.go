package handler

import (
	"github.com/courier-go/courier"
)

// Rejection is the application refusing a notification for good. The
// receiver answers 422 with its code, writes nothing, and the sender does
// not retry.
type Rejection struct {
	Code   courier.Code // stable; rejected when empty
	Detail string       // content-free, shown to the sender
}

func (r *Rejection) Error() string { return "handler: rejected: " + string(r.Code) }

// Reject returns a *Rejection for a Func to return.
func Reject(code courier.Code, detail string) error {
	if code == "" {
		code = courier.CodeRejected
	}
	return &Rejection{Code: code, Detail: detail}
}
