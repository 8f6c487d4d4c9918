// Package coded is the error courier's own packages return: a stable
// courier.Code with a content-free message, printed "code: message".
//
// A user makes the same error with fmt.Errorf("%w: %s", code, msg), and
// tests it with errors.Is(err, code) or courier.CodeOf(err). Courier's
// packages use Error instead for what fmt.Errorf cannot give: the message
// apart from the code (admin answers it as a problem's detail), and a
// broader class the error is a case of, which its message leaves out.
package coded

import "github.com/courier-go/courier"

// Error is an error with a stable code and a message. It wraps its Code
// (errors.Is(err, code) holds, and courier.CodeOf reads it) and, after
// it, Err: courier.CodeOf, which takes the first Code of the chain depth
// first, gives Code, however many codes Err holds.
//
// The message must be content-free like the code: no payload, header or
// secret bytes.
type Error struct {
	Code courier.Code
	Msg  string
	// Err is the broader error this one is a case of, if any: a
	// signature error with an AdCP code wraps courier.CodeSignatureInvalid,
	// so a caller tests for the class with errors.Is and reads the
	// precise code with courier.CodeOf. Its message is not part of e's.
	Err error
}

// Error returns "code: message", or the code alone when Msg is empty.
func (e *Error) Error() string {
	if e.Msg == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Msg
}

// Unwrap returns e's Code, then Err if any.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Code}
	}
	return []error{e.Code, e.Err}
}
