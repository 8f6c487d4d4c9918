package engine

// MaxAttempts is the most attempts any delivery makes: the bound of a
// delivery's max_attempts, and of the budget a settle that spares it, a
// redrive or a publish again raises up to. A delivery that has made them
// is not sent again.
const MaxAttempts = 1000

// Bound returns the value of name where it is a parameter any statement
// of any engine may name besides those its caller gives
// (:max_attempts_bound): a limit the Go side holds, given to the
// statements from here rather than spelt as a literal in each statement
// of each dialect that keeps to it (the migrations' CHECK constraints
// spell it, as a schema must). Package store binds it, and so does a test
// that runs a statement itself.
func Bound(name string) (any, bool) {
	switch name {
	case "max_attempts_bound":
		return MaxAttempts, true
	}
	return nil, false
}
