// Package typewalk visits the struct types a Go type holds, for the
// packages that check a payload type before they serve it: which rules
// validate can run on it, and whether encoding/json can decode it.
package typewalk

import "reflect"

// Structs visits the struct type t holds and, through the field types
// visit returns, every struct type those hold, each once. A type holds
// the struct it is, or that its pointer, slice, array or map elements
// hold; other types hold none. after, if not nil, runs for a struct type
// once the types it led to are visited. The first error ends the walk.
func Structs(t reflect.Type, visit func(t reflect.Type) (follow []reflect.Type, err error), after func(t reflect.Type) error) error {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type) error
	walk = func(t reflect.Type) error {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return nil
		}
		seen[t] = true
		follow, err := visit(t)
		if err != nil {
			return err
		}
		for _, f := range follow {
			if err := walk(f); err != nil {
				return err
			}
		}
		if after != nil {
			return after(t)
		}
		return nil
	}
	return walk(t)
}
