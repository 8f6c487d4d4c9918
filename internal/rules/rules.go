// Package rules lets a package that decodes payloads into a type ask,
// before it serves that type, whether package ack can validate it. Package
// ack registers the check, its validator being its own, so that asking is
// no part of ack's API.
package rules

import "reflect"

var check func(t reflect.Type) error

// Register is called by package ack, once, with its check.
func Register(f func(t reflect.Type) error) { check = f }

// Check returns why ack.Validate cannot validate values of the struct
// type t, or nil when it can.
func Check(t reflect.Type) error { return check(t) }
