// Package typewalk visits the struct types a Go type holds, for the
// packages that check a payload type before they serve it: which rules
// validate can run on it, and whether encoding/json can decode it.
package typewalk

import (
	"reflect"
	"runtime"
	"strings"
	"sync"
)

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

// NilEmbedded returns the embedded field of v (a struct, or a pointer to
// one) through which v has the method name by promotion and that is a nil
// pointer or a nil interface, at any depth of embedding: calling the
// method on v would dereference it, and panic. The field is named as
// package ack names fields: by its json tag's name, or its Go name where
// the tag gives none, after the json names of the embedded fields on its
// way that have one. ok is false when the method is v's own, or every
// embedded field on its way is set, or v has no such method.
func NilEmbedded(v reflect.Value, name string) (field string, ok bool) {
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", false
	}
	key := methodKey{v.Type(), name}
	path, cached := methodPaths.Load(key)
	if !cached {
		path, _ = methodPaths.LoadOrStore(key, methodPath(v.Type(), name, maxElems))
	}
	var at []string
	for _, i := range path.([]int) {
		f := v.Type().Field(i)
		v = v.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
			if tag == "" || tag == "-" {
				tag = f.Name
			}
			return strings.Join(append(at, tag), "."), true
		}
		if tag != "" && tag != "-" {
			at = append(at, tag)
		}
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			v = v.Elem()
		}
	}
	return "", false
}

// methodPaths holds, per struct type and method name, the embedded fields
// by index through which the type has the method (methodPath).
var methodPaths sync.Map // methodKey -> []int

type methodKey struct {
	t    reflect.Type
	name string
}

// methodPath returns the embedded fields, by index, through which struct
// type t has the method name by promotion, as Go selects it: through the
// embedded field that has it at the shallowest depth (Go allows only one
// there), looking at most limit embeddings down. It returns none when t
// declares the method itself, or has it from no embedded field.
func methodPath(t reflect.Type, name string, limit int) []int {
	if t.Kind() != reflect.Struct || limit == 0 || declares(t, name) {
		return nil
	}
	var best []int
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if !f.Anonymous || !hasMethod(ft, name) {
			continue
		}
		if p := append([]int{i}, methodPath(ft, name, limit-1)...); best == nil || len(p) < len(best) {
			best = p
		}
	}
	return best
}

// hasMethod reports whether a value of type t, or a pointer to one, has
// the method name.
func hasMethod(t reflect.Type, name string) bool {
	if t.Kind() == reflect.Interface {
		_, ok := t.MethodByName(name)
		return ok
	}
	_, ok := reflect.PointerTo(t).MethodByName(name)
	return ok
}

// declares reports whether t declares the method name itself, on its
// value or its pointer receiver, rather than having it by promotion. The
// compiler writes the method a struct type has by promotion (and the
// pointer's wrapper of a value method); a declared one has its source.
func declares(t reflect.Type, name string) bool {
	for _, mt := range []reflect.Type{t, reflect.PointerTo(t)} {
		if m, ok := mt.MethodByName(name); ok {
			pc := m.Func.Pointer()
			if file, _ := runtime.FuncForPC(pc).FileLine(pc); file != "<autogenerated>" {
				return true
			}
		}
	}
	return false
}
