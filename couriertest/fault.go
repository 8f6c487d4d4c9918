package couriertest

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"
)

// Fault is what the server does to one request, before or after the real
// receiver runs. The zero Fault lets the request through untouched. The
// after-commit faults combine: Delay first, then DropAfterCommit or
// WrongAck.
type Fault struct {
	// Status answers this status (200 to 599; one outside them is
	// answered 500) without running the receiver, e.g. 503 or 429, with
	// a problem body of code CodeFault; the fields after RetryAfter are
	// then ignored. 0 means none: the receiver runs, and RetryAfter is
	// ignored.
	Status int
	// RetryAfter is the Retry-After header sent with Status, if not empty.
	RetryAfter string
	// Delay runs the receiver (it commits), then holds the response this
	// long before writing it: a response that arrives after the sender's
	// timeout. The hold ends early when the client hangs up or the server
	// closes.
	Delay time.Duration
	// DropAfterCommit runs the receiver (it commits), then closes the
	// connection without answering.
	DropAfterCommit bool
	// WrongAck runs the receiver (it commits), then answers its 200 with
	// the Ack altered: one hex digit of notification_sha256 changed (of
	// payload_sha256 in a Source's command response), so the Ack parses
	// but does not verify. Answers other than 200 pass unaltered.
	WrongAck bool
}

// Script decides the fault for the attempt-th request (1-based, counted
// per notification id) of a notification. The notification id is the
// webhook-id header (or svix-id) where the scheme sends one, as Standard
// Webhooks does; RFC 9421, AdCP HMAC and Bearer requests carry none, so
// it is the body's idempotency_key (AdCP) or notification_id, and for a
// body with neither the body's SHA-256 in hex (a redelivery sends the
// same bytes). It is called concurrently for concurrent requests.
type Script func(notificationID string, attempt int) Fault

// MaxFaultedAttempt is the last attempt SeededScript may fault: from the
// next attempt on, every request goes through.
const MaxFaultedAttempt = 6

// ScriptSpec says which faults SeededScript injects and how often. The
// fractions are of the attempts 1 to MaxFaultedAttempt that FirstAttempt503
// leaves alone; each attempt gets at most one of them, so they must add up
// to at most 1.
type ScriptSpec struct {
	// FirstAttempt503 answers every notification's first attempt 503 with
	// Retry-After: 1.
	FirstAttempt503 bool
	// RateLimited is the fraction of attempts answered 429 with
	// Retry-After: 1.
	RateLimited float64
	// DropAfterCommit is the fraction of attempts dropped after the
	// receiver committed.
	DropAfterCommit float64
	// Delay is the fraction of attempts held for DelayBy after the receiver
	// committed.
	Delay float64
	// DelayBy is how long a delayed attempt is held. Required when Delay is
	// set.
	DelayBy time.Duration
	// WrongAck is the fraction of attempts answered with an altered Ack.
	// A courier sender fails such a delivery for good (ack_invalid): leave
	// it 0 where every notification must be delivered.
	WrongAck float64
}

// sumSlack is how far over 1 the float64 sum of ScriptSpec's fractions may
// come and still add up to 1: decimal fractions that do as written may not
// in binary (0.2 + 0.4 + 0.3 + 0.1 is 1.0000000000000002), and the few
// ulps four additions can gain are far below any fraction a test means.
const sumSlack = 1e-9

func (sp ScriptSpec) validate() error {
	sum := 0.0
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"RateLimited", sp.RateLimited},
		{"DropAfterCommit", sp.DropAfterCommit},
		{"Delay", sp.Delay},
		{"WrongAck", sp.WrongAck},
	} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return fmt.Errorf("ScriptSpec.%s must be within 0..1", f.name)
		}
		sum += f.v
	}
	switch {
	case sum > 1+sumSlack:
		return fmt.Errorf("ScriptSpec fractions add up to more than 1")
	case sp.Delay > 0 && sp.DelayBy <= 0:
		return fmt.Errorf("ScriptSpec.DelayBy must be positive when Delay is set")
	}
	return nil
}

// SeededScript returns a Script that injects the faults of spec at random,
// deterministically: each decision is a function of (seed, notification
// id as Script says, attempt) alone, so a rerun with the same seed makes the same
// decisions whatever the order or concurrency of the requests. After
// MaxFaultedAttempt it injects nothing, so every notification eventually
// gets through.
//
// SeededScript panics if spec is invalid (a fraction outside 0..1, a sum
// over 1, Delay without DelayBy), like a test helper given a bad argument.
func SeededScript(seed int64, spec ScriptSpec) Script {
	if err := spec.validate(); err != nil {
		panic("couriertest: " + err.Error())
	}
	return func(id string, attempt int) Fault {
		if attempt < 1 || attempt > MaxFaultedAttempt {
			return Fault{}
		}
		if attempt == 1 && spec.FirstAttempt503 {
			return Fault{Status: 503, RetryAfter: "1"}
		}
		u := draw(seed, id, attempt)
		if u -= spec.RateLimited; u < 0 {
			return Fault{Status: 429, RetryAfter: "1"}
		}
		if u -= spec.DropAfterCommit; u < 0 {
			return Fault{DropAfterCommit: true}
		}
		if u -= spec.Delay; u < 0 {
			return Fault{Delay: spec.DelayBy}
		}
		if u -= spec.WrongAck; u < 0 {
			return Fault{WrongAck: true}
		}
		return Fault{}
	}
}

// draw hashes (seed, id, attempt) with FNV-1a into a uniform float in
// [0, 1). FNV alone barely moves its high bits when only the last input
// bytes change (attempt 2 vs 3), so SplitMix64's finalizer mixes the sum
// before its top 53 bits become the float.
func draw(seed int64, id string, attempt int) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seed))
	h.Write(b[:])
	h.Write([]byte(id))
	h.Write([]byte{0}) // ids are tokens: no NUL, so the boundary is unambiguous
	binary.BigEndian.PutUint64(b[:], uint64(attempt))
	h.Write(b[:])
	z := h.Sum64()
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// Sequence returns a Script that gives each notification's n-th attempt
// faults[n-1] (attempts counted per notification id, as Script says) and
// lets every later attempt through: Sequence(Fault{Status:
// 503}, Fault{Status: 429, RetryAfter: "2"}) answers every notification's
// first attempt 503, its second 429 with Retry-After, and passes the rest.
func Sequence(faults ...Fault) Script {
	faults = slices.Clone(faults)
	return func(_ string, attempt int) Fault {
		if attempt < 1 || attempt > len(faults) {
			return Fault{}
		}
		return faults[attempt-1]
	}
}
