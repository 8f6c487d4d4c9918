// Package nilcheck tells a missing value from a present one where an
// interface may hold a typed nil: a nil *sql.Tx passed as a DBTX, a nil
// *Verifier as a signature.Verifier. Such a value is not == nil, and
// calling a method on it panics, so the packages that take one refuse it
// up front with this check.
package nilcheck

import "reflect"

// Nil reports whether v is nil, or a nil pointer, map, slice, channel or
// func held in an interface.
func Nil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func:
		return rv.IsNil()
	}
	return false
}
