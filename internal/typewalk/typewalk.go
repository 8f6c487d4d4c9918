// Package typewalk visits the struct types a Go type holds, for the
// packages that check a payload type before they serve it: which rules
// validate can run on it, and whether encoding/json can decode it.
package typewalk

import "reflect"

// Structs visits the struct type t holds (see Held) and, through the
// field types visit returns, every struct type those hold, each once. after, if not nil, runs for a struct type
// once the types it led to are visited. The first error ends the walk.
func Structs(t reflect.Type, visit func(t reflect.Type) (follow []reflect.Type, err error), after func(t reflect.Type) error) error {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type) error
	walk = func(t reflect.Type) error {
		t, ok := Held(t)
		if !ok || seen[t] {
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

// maxElems bounds how many pointer, slice, array and map types Held and
// Deref look through: a type may hold only itself (type S []S), which no bound but
// this one ends, and none a payload declares nests anywhere near as deep.
const maxElems = 64

// Held returns the struct type t holds: t itself, or what its pointer,
// slice, array or map elements hold; ok is false if it holds none.
func Held(t reflect.Type) (s reflect.Type, ok bool) {
	for range maxElems {
		switch t.Kind() {
		case reflect.Struct:
			return t, true
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return nil, false
		}
	}
	return nil, false
}

// Deref returns the type a pointer type finally points to, t itself if
// it is no pointer; a pointer type that points to itself (type P *P) is
// returned as a pointer after maxElems steps.
func Deref(t reflect.Type) reflect.Type {
	for n := 0; t.Kind() == reflect.Pointer && n < maxElems; n++ {
		t = t.Elem()
	}
	return t
}
