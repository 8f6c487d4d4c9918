package handler

import (
	"github.com/courier-go/courier"
)

// rejection is the application refusing a notification for good (see
// Reject). It unwraps to its code, so courier.CodeOf reads the code;
// the detail is the answer's, not part of the error's message.
type rejection struct {
	code   courier.Code
	detail string
}

func (r *rejection) Error() string { return "handler: rejected: " + string(r.code) }

func (r *rejection) Unwrap() error { return r.code }

// Reject returns the error a Func returns to refuse a notification for
// good: the receiver answers 422 with code (rejected when empty) and the
// content-free detail, writes nothing, and a courier sender fails the
// delivery without retrying it (under client.DefaultClassify; one whose
// Classify is client.RetryClientErrors retries a 422 as any 4xx).
// courier.CodeOf reports the code of the returned error.
//
// A courier sender keeps the code beside its own (store.Delivery's
// LastRemoteCode, the attempts log, its events) when the code has
// courier.Code's form, as "plan_unknown" (a lowercase letter followed by
// at most 127 lowercase letters, digits, '_', '.' or '-'). A code of another form ("PlanUnknown") is answered
// as given, but the sender keeps none, and promcourier counts it "other".
//
// But a function whose transaction cannot be rolled back (the database
// ended its connection) failed with the store, whatever it returned: the
// receiver answers 503 internal_error, and the sender's retry runs the
// function again.
func Reject(code courier.Code, detail string) error {
	if code == "" {
		code = courier.CodeRejected
	}
	return &rejection{code: code, detail: detail}
}
