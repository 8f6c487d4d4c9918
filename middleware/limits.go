package middleware

import (
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/wire"
)

// Defaults of [BodyLimits].
const (
	// defaultMaxBytes is the largest body read unless BodyLimits says
	// otherwise: 1 MiB, courier's request body bound, which the outbox
	// also holds commands to.
	defaultMaxBytes = wire.MaxBody
	// defaultReadTimeout is how long a body may take to arrive: under the
	// worker's 15 s attempt timeout, so a sender that is merely slow is
	// answered 408 rather than left to time out itself.
	defaultReadTimeout = 10 * time.Second
	// defaultBudgetBytes is the size of the Budget made when none is
	// given: 64 bodies of defaultMaxBytes at once.
	defaultBudgetBytes = 64 << 20
	// defaultLingerTimeout bounds how long a refused request's body is
	// discarded (nginx's lingering close).
	defaultLingerTimeout = 5 * time.Second
	// defaultLingerBytes bounds how much of a refused request's body is
	// discarded.
	defaultLingerBytes = 32 << 20
)

// BodyLimits bounds what reading one request body may cost a server: its
// size (MaxBytes), how long it may take to arrive (ReadTimeout), and,
// through a [Budget] that requests share, how many bytes all of them hold in
// buffers at once. A refusal before the body is read (413 over MaxBytes, 503
// over the Budget) does not leave the client mid-upload: what it still sends
// is discarded, up to LingerBytes and LingerTimeout, before the connection
// closes, so a client that sends its whole request before reading the
// answer gets the answer instead of a connection reset.
//
// Zero fields take the defaults their docs give; [Verify] and [ReadBody]
// panic on limits [BodyLimits.Validate] refuses.
type BodyLimits struct {
	// MaxBytes is the largest body accepted; a larger one is answered 413
	// body_too_large. Defaults to 1 MiB.
	MaxBytes int64
	// ReadTimeout bounds the time from the start of the body read until the
	// whole body has arrived; a body still incomplete then is answered 408
	// request_timeout and its connection is closed. A server's own
	// http.Server.ReadTimeout stays in force when it is shorter. Defaults
	// to 10 seconds. It is a deadline on the connection, set through
	// http.ResponseController: served through a ResponseWriter wrapper
	// that has no Unwrap (an application's logging or metrics middleware,
	// say), it cannot be set, and only the server's ReadTimeout bounds the
	// body (courier's handlers log that once, at Warn).
	ReadTimeout time.Duration
	// Budget is what bodies are buffered against: each request reserves its
	// Content-Length (MaxBytes when the length is unknown) before reading,
	// and is answered 503 server_busy with Retry-After at once when the
	// Budget cannot spare it. Share one Budget between handlers to bound
	// them together. Defaults to a new Budget of 64 MiB (or of
	// MaxBytes, if larger) for each [Verify]; [ReadBody] calls that leave it
	// nil share one Budget of 64 MiB.
	Budget *Budget
	// LingerTimeout bounds how long the rest of a refused body is
	// discarded, and a server shutting down ends the discard at once.
	// Defaults to 5 seconds.
	LingerTimeout time.Duration
	// LingerBytes bounds how many bytes of a refused body are discarded;
	// a client that sends more than that sees the connection reset.
	// Defaults to 32 MiB.
	LingerBytes int64
}

// defaulted returns a copy of l with every zero field at its default, a
// nil Budget included: a new Budget, of this copy's own.
func (l BodyLimits) defaulted() BodyLimits {
	l = l.withDefaults(nil)
	if l.Budget == nil {
		l.Budget = NewBudget(max(defaultBudgetBytes, l.MaxBytes))
	}
	return l
}

// withDefaults is defaulted with budget, which may be nil, for a nil
// Budget.
func (l BodyLimits) withDefaults(budget *Budget) BodyLimits {
	if l.MaxBytes == 0 {
		l.MaxBytes = defaultMaxBytes
	}
	if l.ReadTimeout == 0 {
		l.ReadTimeout = defaultReadTimeout
	}
	if l.Budget == nil {
		l.Budget = budget
	}
	if l.LingerTimeout == 0 {
		l.LingerTimeout = defaultLingerTimeout
	}
	if l.LingerBytes == 0 {
		l.LingerBytes = defaultLingerBytes
	}
	return l
}

// Validate reports the first field of l that no request could be read
// with, as an error of class courier.CodeConfigInvalid naming the field.
// Zero fields are valid: they take their defaults.
func (l BodyLimits) Validate() error {
	switch {
	case l.MaxBytes < 0:
		return configError("BodyLimits.MaxBytes must not be negative")
	case l.ReadTimeout < 0:
		return configError("BodyLimits.ReadTimeout must not be negative")
	case l.LingerTimeout < 0:
		return configError("BodyLimits.LingerTimeout must not be negative")
	case l.LingerBytes < 0:
		return configError("BodyLimits.LingerBytes must not be negative")
	case l.Budget != nil && l.Budget.Size() < l.withDefaults(nil).MaxBytes:
		// also the zero Budget, which admits nothing
		return configError("BodyLimits.Budget is smaller than MaxBytes: no body of MaxBytes could ever be read")
	}
	return nil
}

// mustValidate panics, as a middleware does when it is built, on limits
// Validate refuses.
func mustValidate(l BodyLimits) {
	if err := l.Validate(); err != nil {
		panic(err)
	}
}

func configError(msg string) error {
	return &coded.Error{Code: courier.CodeConfigInvalid, Msg: "middleware: " + msg}
}
