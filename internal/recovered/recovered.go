// Package recovered runs a function and tells a panic in it from
// runtime.Goexit, for the parts of courier that answer a panic in an
// application's handler (package middleware's Recover, package handler's
// receivers).
package recovered

import (
	"runtime"
	"runtime/debug"
)

// Run runs fn and returns what it panicked with, and the stack of the
// goroutine as it panicked, if it panicked; if fn ends its goroutine
// (runtime.Goexit, as t.FailNow does), so does Run, and nothing after it
// runs. A nil from recover is a panic too: panic(nil) where GODEBUG's
// panicnil=1 lets recover return nil. It is given back as a
// *runtime.PanicNilError, what Go raises for panic(nil) by default, so
// that whoever recovers it next takes it for the panic it is. Goexit is
// told apart by what follows the recover: after a panic, recovered, fn's
// caller runs on; after Goexit, nothing of it does.
func Run(fn func()) (v any, stack []byte, panicked bool) {
	returned := false
	func() {
		defer func() {
			if !returned {
				v, stack = recover(), debug.Stack() // the stack of the panic, not yet unwound
			}
		}()
		fn()
		returned = true
	}()
	if returned {
		return nil, nil, false
	}
	if v == nil {
		v = new(runtime.PanicNilError)
	}
	return v, stack, true
}
