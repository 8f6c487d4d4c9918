// Package logkey holds the attribute keys courier's loggers use, one
// constant each, so the worker, the receivers, the middleware and the admin
// surface name the same thing the same way. The public promise is the list
// in the root package's documentation (github.com/courier-go/courier,
// "Log attributes"); a test holds this package and that list to each other,
// and the packages' tests fail on a logged key that is not in it.
package logkey

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
)

// The keys. Each means one thing, with one type of value.
const (
	Delivery    = "delivery"      // int: the outbox delivery's id
	Attempt     = "attempt"       // int: the attempt's number, from 1
	Endpoint    = "endpoint"      // string: the endpoint as scheme://host ("/…" for a path), never userinfo, path or query
	EndpointRef = "endpoint_ref"  // string: the endpoint's opaque reference, as the ops page and the CLI show it
	Status      = "status"        // string: the delivery's status after the attempt
	HTTPStatus  = "http_status"   // int: an HTTP status: the receiver's, or the one answered
	Code        = "code"          // string: courier's stable code
	AttemptCode = "attempt_code"  // string: the attempt's own code, where the delivery ended with another
	RemoteCode  = "remote_code"   // string: the code of the receiver's problem+json refusal
	Duration    = "duration"      // duration: how long the attempt took
	LeaseLeft   = "lease_left"    // duration: what was left of a lease
	Timeout     = "timeout"       // duration: the worker's attempt timeout
	OpenUntil   = "open_until"    // time: until when an endpoint's open breaker holds its deliveries back
	Deliveries  = "deliveries"    // int: how many deliveries an operation concerned
	Owner       = "owner"         // string: the worker's name
	Error       = "error"         // error: the cause of a failure, for operators
	Panic       = "panic"         // bool, or the recovered value (middleware.Recover)
	Stack       = "stack"         // string: the stack of a recovered panic
	Action      = "action"        // string: the operator's action (admin)
	Count       = "count"         // int: how many rows an operator's action changed (admin)
	ID          = "id"            // int: the delivery or subscription an operator acted on (admin)
	MaxInFlight = "max_in_flight" // int: an endpoint's limit of deliveries in flight, 0 for none (admin)
	Rate        = "rate"          // float: an endpoint's limit of requests per second, 0 for none (admin)
	Burst       = "burst"         // int: an endpoint's rate limit's burst (admin)
)

// All returns every key, in the order of the constants.
func All() []string {
	return []string{Delivery, Attempt, Endpoint, EndpointRef, Status, HTTPStatus, Code, AttemptCode, RemoteCode, Duration,
		LeaseLeft, Timeout, OpenUntil, Deliveries, Owner, Error, Panic, Stack, Action, Count, ID, MaxInFlight, Rate, Burst}
}

// Undocumented returns the keys of r's attributes that are not courier's
// (members of a group as group.member), for the tests of every package that
// logs.
func Undocumented(r slog.Record) []string {
	var out []string
	r.Attrs(func(a slog.Attr) bool {
		out = append(out, undocumented("", a)...)
		return true
	})
	return out
}

func undocumented(prefix string, a slog.Attr) []string {
	if a.Value.Kind() == slog.KindGroup {
		var out []string
		for _, m := range a.Value.Group() {
			out = append(out, undocumented(prefix+a.Key+".", m)...)
		}
		return out
	}
	if !slices.Contains(All(), prefix+a.Key) {
		return []string{prefix + a.Key}
	}
	return nil
}

// UndocumentedJSON is Undocumented for the lines of a slog.JSONHandler's
// output (its time, level and msg aside); a line that is not JSON is
// reported whole.
func UndocumentedJSON(logs string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			out = append(out, sc.Text())
			continue
		}
		for k := range line {
			if k != slog.TimeKey && k != slog.LevelKey && k != slog.MessageKey && !slices.Contains(All(), k) {
				out = append(out, k)
			}
		}
	}
	return out
}
