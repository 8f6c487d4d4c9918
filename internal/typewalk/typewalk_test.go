package typewalk_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/courier-go/courier/internal/typewalk"
)

type (
	node struct {
		Kids  []node
		Up    *node
		Leaf  map[string][2]leaf
		Count int
	}
	leaf struct{ Name string }
)

// TestStructsVisitsEachOnceAndAfterItsFields: a recursive type is visited
// once, the struct types behind pointers, slices, arrays and maps are
// reached, after runs once a type's fields are done, and an error ends
// the walk.
func TestStructsVisitsEachOnceAndAfterItsFields(t *testing.T) {
	var order []string
	fields := func(t reflect.Type) ([]reflect.Type, error) {
		order = append(order, "visit "+t.Name())
		var follow []reflect.Type
		for i := range t.NumField() {
			follow = append(follow, t.Field(i).Type)
		}
		return follow, nil
	}
	after := func(t reflect.Type) error { order = append(order, "after "+t.Name()); return nil }
	if err := typewalk.Structs(reflect.TypeFor[*[]node](), fields, after); err != nil {
		t.Fatal(err)
	}
	want := []string{"visit node", "visit leaf", "after leaf", "after node"}
	if !slices.Equal(order, want) {
		t.Fatalf("walked %q, want %q", order, want)
	}
	stop := errors.New("stop")
	err := typewalk.Structs(reflect.TypeFor[node](), func(t reflect.Type) ([]reflect.Type, error) {
		if t.Name() == "leaf" {
			return nil, stop
		}
		return fields(t)
	}, nil)
	if !errors.Is(err, stop) {
		t.Fatalf("Structs = %v, want the visit's error", err)
	}
	if err := typewalk.Structs(reflect.TypeFor[map[string]int](), fields, after); err != nil {
		t.Fatal(err)
	}
}

type (
	selfSlice   []selfSlice
	selfPointer *selfPointer
	holdsSelf   struct {
		Kids selfSlice
		Up   selfPointer
	}
)

// TestTypesThatHoldOnlyThemselves: a slice of itself, or a pointer to
// itself, holds no struct, and the walk ends; it looked through them
// without end, so NewReceiver of a payload with such a field never
// returned.
func TestTypesThatHoldOnlyThemselves(t *testing.T) {
	if s, ok := typewalk.Held(reflect.TypeFor[selfSlice]()); ok {
		t.Fatalf("Held(selfSlice) = %v, want none", s)
	}
	if d := typewalk.Deref(reflect.TypeFor[selfPointer]()); d.Kind() != reflect.Pointer {
		t.Fatalf("Deref(selfPointer) = %v, want a pointer type", d)
	}
	var visited []string
	err := typewalk.Structs(reflect.TypeFor[holdsSelf](), func(t reflect.Type) ([]reflect.Type, error) {
		visited = append(visited, t.Name())
		return []reflect.Type{t.Field(0).Type, t.Field(1).Type}, nil
	}, nil)
	if err != nil || !slices.Equal(visited, []string{"holdsSelf"}) {
		t.Fatalf("Structs visited %q, %v; want holdsSelf alone", visited, err)
	}
	if s, ok := typewalk.Held(reflect.TypeFor[map[string][]*holdsSelf]()); !ok || s != reflect.TypeFor[holdsSelf]() {
		t.Fatalf("Held(map of slices of pointers) = %v, %t; want holdsSelf", s, ok)
	}
}

type (
	keyed struct{ ID string }
	// keyedOwn declares Key itself, shadowing its embedded field's.
	keyedOwn struct {
		*keyed
	}
	keyedPromoted struct {
		*keyed
	}
	keyedDeep struct {
		keyedTwice `json:"twice"`
	}
	keyedTwice struct {
		*keyed
	}
	keyer          interface{ Key() string }
	keyedInterface struct{ keyer }
)

func (k *keyed) Key() string   { return k.ID }
func (k keyedOwn) Key() string { return "own" }

// TestNilEmbedded: a method promoted through an embedded pointer or
// interface that is nil is found, named by the json names on its way; one
// the type declares itself, or reached through set fields, is not.
func TestNilEmbedded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		v     any
		field string
	}{
		{"promoted through a nil pointer", keyedPromoted{}, "keyed"},
		{"a pointer to it", &keyedPromoted{}, "keyed"},
		{"set", keyedPromoted{keyed: &keyed{}}, ""},
		{"declared on the type", keyedOwn{}, ""},
		{"two deep, after a tagged field", keyedDeep{}, "twice.keyed"},
		{"through an interface", keyedInterface{}, "keyer"},
		{"no such method", keyed{}, ""},
	} {
		field, ok := typewalk.NilEmbedded(reflect.ValueOf(tc.v), "Key")
		if field != tc.field || ok != (tc.field != "") {
			t.Errorf("%s: NilEmbedded = %q, %v, want %q", tc.name, field, ok, tc.field)
		}
	}
}
