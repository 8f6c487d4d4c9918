// Package examplecheck keeps courier's Example functions copyable: as go
// doc and pkg.go.dev render them, each compiles pasted into an
// application's main with the imports it names, and none discards an
// error.
package examplecheck
