package ack_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/courier-go/courier/ack"
)

// orderedNote fails on a struct field, on slice elements, on a map's
// values and on the fields of a map's struct values.
type orderedNote struct {
	Zone   string               `json:"zone" validate:"required"`
	Items  []orderedItem        `json:"items" validate:"dive"`
	Counts map[string]int       `json:"counts" validate:"dive,gt=0"`
	Nested map[int]orderedItem  `json:"nested" validate:"dive"`
	Deep   map[string][]float64 `json:"deep" validate:"dive,dive,gt=0"`
	Label  string               `json:"label" validate:"required"`
}

type orderedItem struct {
	Qty  int    `json:"qty" validate:"gt=0"`
	Name string `json:"name" validate:"required"`
}

// TestValidateListsFieldsInOneOrder: Validate went through a map's entries
// in Go's order, which changes from run to run, so one value failed with
// its fields listed in another order each time (and a refusal cut to its
// first fields named other ones). It now lists a struct's fields in their
// order and, under each, slice elements by index and map entries by key.
func TestValidateListsFieldsInOneOrder(t *testing.T) {
	t.Parallel()
	n := orderedNote{
		Items:  make([]orderedItem, 12),
		Counts: map[string]int{},
		Nested: map[int]orderedItem{10: {}, 2: {Qty: 1}, 1: {Name: "x"}},
		Deep:   map[string][]float64{"b": {1, 0}, "a": {0}},
	}
	for i := range n.Items {
		n.Items[i] = orderedItem{Qty: 1, Name: "x"}
	}
	n.Items[10].Qty, n.Items[2].Name = 0, ""
	for i := range 20 {
		n.Counts[fmt.Sprintf("k%d", i)] = 0
	}
	var first []ack.FieldError
	for range 20 {
		var ve *ack.ValidationError
		if err := ack.Validate(n); !errors.As(err, &ve) {
			t.Fatalf("Validate = %v, want a *ValidationError", err)
		}
		if first == nil {
			first = ve.Fields
			continue
		}
		if !reflect.DeepEqual(ve.Fields, first) {
			t.Fatalf("one value failed as\n%v\nthen as\n%v", first, ve.Fields)
		}
	}
	var got []string
	for _, f := range first {
		got = append(got, f.Field+" "+f.Rule)
	}
	want := []string{"zone required", "items[2].name required", "items[10].qty gt"}
	for i := range 20 {
		want = append(want, fmt.Sprintf("counts[k%d] gt", i))
	}
	want = append(want, "nested[1].qty gt", "nested[2].name required", "nested[10].name required", "nested[10].qty gt",
		"deep[a][0] gt", "deep[b][1] gt", "label required")
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("fields\n%q\nwant\n%q", got, want)
	}
}

// TestValidationErrorMessageIsBounded: the message of a failure of many
// fields names the first 100 and counts the others, and cuts a long path.
func TestValidationErrorMessageIsBounded(t *testing.T) {
	t.Parallel()
	ve := &ack.ValidationError{}
	for i := range 100000 {
		ve.Fields = append(ve.Fields, ack.FieldError{Field: fmt.Sprintf("items[%d].qty", i), Rule: "gt"})
	}
	ve.Fields[0].Field = strings.Repeat("é", 1000)
	msg := ve.Error()
	if len(msg) > 100*(256+16) || !strings.HasSuffix(msg, "items[99].qty (gt), and 99900 more") || !strings.Contains(msg, "é…é") || !strings.Contains(msg, "é (gt), items[1].qty (gt)") {
		t.Fatalf("message of %d bytes: %q … %s", len(msg), msg[:300], msg[max(0, len(msg)-80):])
	}
}
