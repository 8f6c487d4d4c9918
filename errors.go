package courier

import "errors"

// Error is an error with a stable [Code] and a message. It matches its
// code with [errors.Is], however deeply it is wrapped:
//
//	errors.Is(fmt.Errorf("enqueue: %w", &courier.Error{Code: courier.CodeIdempotencyCollision, Msg: "…"}), courier.CodeIdempotencyCollision)
//
// The message must be content-free like the code: no payload, header or
// secret bytes.
type Error struct {
	Code Code
	Msg  string
	// Err is the broader error this one is a case of, if any: a signature
	// error with an AdCP code wraps CodeSignatureInvalid, so callers can test
	// for the class with errors.Is and read the precise code with CodeOf.
	Err error
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Msg
}

// Unwrap returns the broader error e is a case of, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's code, or an *Error with the same code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return t == e.Code
	case *Error:
		return t.Code == e.Code
	}
	return false
}

// coded is an error that carries a code: an *Error or a bare Code.
type coded interface {
	error
	code() Code
}

func (e *Error) code() Code { return e.Code }

// CodeOf returns the code of the first *Error or Code in err's chain, or ""
// if none.
func CodeOf(err error) Code {
	var c coded
	if errors.As(err, &c) {
		return c.code()
	}
	return ""
}
