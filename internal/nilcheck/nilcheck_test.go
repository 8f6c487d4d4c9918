package nilcheck

import (
	"database/sql"
	"testing"
)

type doer interface{ Do() }

type ptrDoer struct{}

func (*ptrDoer) Do() {}

type funcDoer func()

func (f funcDoer) Do() { f() }

type valueDoer struct{}

func (valueDoer) Do() {}

func TestNil(t *testing.T) {
	t.Parallel()
	var tx *sql.Tx
	var p *ptrDoer
	var f funcDoer
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"untyped nil", nil, true},
		{"nil *sql.Tx", tx, true},
		{"nil pointer as an interface", doer(p), true},
		{"nil func as an interface", doer(f), true},
		{"pointer", &ptrDoer{}, false},
		{"func", doer(funcDoer(func() {})), false},
		{"value", doer(valueDoer{}), false},
		{"zero int", 0, false},
	}
	for _, tt := range tests {
		if got := Nil(tt.v); got != tt.want {
			t.Errorf("%s: Nil = %v, want %v", tt.name, got, tt.want)
		}
	}
}
