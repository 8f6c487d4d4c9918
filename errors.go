package courier

import "errors"

// Error is an error with a stable [Code]. Two Errors match with [errors.Is]
// when their codes are equal, so a wrapped, more specific error still matches
// the package's sentinel:
//
//	errors.Is(fmt.Errorf("enqueue: %w", courier.NewError(courier.CodeIdempotencyCollision, "…")), courier.ErrIdempotencyCollision)
//
// The message must be content-free like the code: no payload, header or
// secret bytes.
type Error struct {
	Code Code
	Msg  string
	// Err is the broader error this one is a case of, if any: a signature
	// error with an AdCP code wraps ErrSignatureInvalid, so callers can test
	// for the class with errors.Is and read the precise code with CodeOf.
	Err error
}

// NewError returns an *Error with the code and a content-free message.
func NewError(code Code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// Wrap returns an *Error with the code and message that is a case of class.
func Wrap(class error, code Code, msg string) *Error { return &Error{Code: code, Msg: msg, Err: class} }

func (e *Error) Error() string {
	if e.Msg == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Msg
}

// Unwrap returns the broader error e is a case of, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the code of the first *Error in err's chain, or "" if none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Sentinel errors. Compare with errors.Is; the store and the worker wrap them
// with context.
var (
	ErrIdempotencyCollision = &Error{Code: CodeIdempotencyCollision, Msg: "same identity, different content"}
	ErrLeaseLost            = &Error{Code: CodeLeaseLost, Msg: "lease no longer held"}
	ErrAckInvalid           = &Error{Code: CodeAckInvalid, Msg: "acknowledgement does not match the delivery"}
	ErrDestinationForbidden = &Error{Code: CodeDestinationForbidden, Msg: "destination not allowed"}
	ErrNotFound             = &Error{Code: CodeNotFound, Msg: "not found"}
	ErrPayloadInvalid       = &Error{Code: CodePayloadInvalid, Msg: "payload invalid"}
	ErrSchemaOutdated       = &Error{Code: CodeSchemaOutdated, Msg: "database schema needs migrating"}
	ErrSchemaAltered        = &Error{Code: CodeSchemaAltered, Msg: "database schema was altered"}
	ErrSchemaTooNew         = &Error{Code: CodeSchemaTooNew, Msg: "database schema is newer than this courier"}
	ErrSignatureInvalid     = &Error{Code: CodeSignatureInvalid, Msg: "signature invalid"}
	ErrConfigInvalid        = &Error{Code: CodeConfigInvalid, Msg: "configuration invalid"}
)
