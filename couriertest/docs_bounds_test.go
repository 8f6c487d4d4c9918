package couriertest_test

import (
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier/couriertest"
)

// TestSeededScriptTakesFractionsThatAddUpToOne: ScriptSpec's fractions
// must each be within 0..1 and add up to at most 1, the bounds included.
// Decimal fractions that add up to exactly 1 as written are taken whatever
// order floating point adds them in: 0.2 + 0.4 + 0.3 + 0.1 is
// 1.0000000000000002 in float64, and SeededScript panicked on it as a
// sum over one.
func TestSeededScriptTakesFractionsThatAddUpToOne(t *testing.T) {
	t.Parallel()
	for name, spec := range map[string]couriertest.ScriptSpec{
		"all zero":             {},
		"RateLimited 1":        {RateLimited: 1},
		"DropAfterCommit 1":    {DropAfterCommit: 1},
		"Delay 1":              {Delay: 1, DelayBy: time.Millisecond},
		"WrongAck 1":           {WrongAck: 1},
		"0.2+0.4+0.3+0.1":      {RateLimited: 0.2, DropAfterCommit: 0.4, Delay: 0.3, DelayBy: time.Second, WrongAck: 0.1},
		"0.4+0.2+0.3+0.1":      {RateLimited: 0.4, DropAfterCommit: 0.2, Delay: 0.3, DelayBy: time.Second, WrongAck: 0.1},
		"0.7+0.1+0.1+0.1":      {RateLimited: 0.7, DropAfterCommit: 0.1, Delay: 0.1, DelayBy: time.Second, WrongAck: 0.1},
		"a quarter each":       {RateLimited: 0.25, DropAfterCommit: 0.25, Delay: 0.25, DelayBy: time.Second, WrongAck: 0.25},
		"0.1 + 0.2 + 0.7":      {RateLimited: 0.1, DropAfterCommit: 0.2, WrongAck: 0.7},
		"0.15+0.35+0.3+0.2":    {RateLimited: 0.15, DropAfterCommit: 0.35, Delay: 0.3, DelayBy: time.Second, WrongAck: 0.2},
		"0.33+0.33+0.33+0.01":  {RateLimited: 0.33, DropAfterCommit: 0.33, Delay: 0.33, DelayBy: time.Second, WrongAck: 0.01},
		"0.05+0.15+0.45+0.35":  {RateLimited: 0.05, DropAfterCommit: 0.15, Delay: 0.45, DelayBy: time.Second, WrongAck: 0.35},
		"0.6+0.3+0.1":          {RateLimited: 0.6, DropAfterCommit: 0.3, WrongAck: 0.1},
		"1 - 0.2 - 0.3 - 0.4 ": {RateLimited: 1 - 0.2 - 0.3 - 0.4, DropAfterCommit: 0.2, Delay: 0.3, DelayBy: time.Second, WrongAck: 0.4},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("SeededScript(%+v) panicked: %v", spec, p)
				}
			}()
			script := couriertest.SeededScript(1, spec)
			if spec.RateLimited+spec.DropAfterCommit+spec.Delay+spec.WrongAck > 0.99 {
				for i := range 200 { // fractions that add up to one leave no attempt alone
					if f := script(fmt.Sprintf("n-%d", i), 2); f == (couriertest.Fault{}) {
						t.Fatalf("n-%d attempt 2 is not faulted, with fractions adding up to 1", i)
					}
				}
			}
		})
	}
}

// TestSeededScriptRefusesOnePastEachBound: one step past a fraction's
// bounds, or a sum clearly over one, still panics.
func TestSeededScriptRefusesOnePastEachBound(t *testing.T) {
	t.Parallel()
	for name, spec := range map[string]couriertest.ScriptSpec{
		"RateLimited below 0":     {RateLimited: math.Nextafter(0, -1)},
		"DropAfterCommit over 1":  {DropAfterCommit: math.Nextafter(1, 2)},
		"Delay over 1":            {Delay: math.Nextafter(1, 2), DelayBy: time.Second},
		"WrongAck +Inf":           {WrongAck: math.Inf(1)},
		"sum 1.001":               {RateLimited: 0.5, DropAfterCommit: 0.501},
		"sum of two ones":         {RateLimited: 1, WrongAck: 1},
		"Delay with DelayBy 0":    {Delay: 0.1},
		"Delay with DelayBy < 0":  {Delay: 0.1, DelayBy: -time.Second},
		"sum one and a millionth": {RateLimited: 0.5, DropAfterCommit: 0.5, WrongAck: 1e-6},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Fatalf("SeededScript(%+v) did not panic", spec)
				}
			}()
			couriertest.SeededScript(1, spec)
		})
	}
}

// TestFaultStatusBounds: a Status fault is answered as given from 200 to
// 599, the bounds included; one outside them is answered 500 with
// CodeFault, the handler behind not run either way.
func TestFaultStatusBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ status, want int }{
		{200, 200}, {599, 599}, {199, 500}, {600, 500}, {-1, 500},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			srv := couriertest.NewServer(ackHandler(&calls), couriertest.Sequence(couriertest.Fault{Status: tc.status}))
			defer srv.Close()
			st, body, err := post(t.Context(), srv, "n-1", []byte(`{"n":1}`))
			if err != nil || st != tc.want {
				t.Fatalf("Fault{Status: %d} answered %d, %v; want %d", tc.status, st, err, tc.want)
			}
			var problem struct{ Code string }
			if err := json.Unmarshal(body, &problem); err != nil || problem.Code != string(couriertest.CodeFault) {
				t.Errorf("Fault{Status: %d} answered %s; want a problem with code %s", tc.status, body, couriertest.CodeFault)
			}
			if calls.Load() != 0 {
				t.Errorf("the handler ran %d times behind a Status fault", calls.Load())
			}
		})
	}
}
