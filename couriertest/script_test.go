package couriertest_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/courier-go/courier/couriertest"
)

var chaos = couriertest.ScriptSpec{
	FirstAttempt503: true,
	RateLimited:     0.1,
	DropAfterCommit: 0.2,
	Delay:           0.1,
	DelayBy:         time.Second,
	WrongAck:        0.05,
}

func TestSeededScriptIsDeterministic(t *testing.T) {
	t.Parallel()
	a, again, other := couriertest.SeededScript(1, chaos), couriertest.SeededScript(1, chaos), couriertest.SeededScript(2, chaos)
	differs := false
	for i := range 200 {
		id := fmt.Sprintf("terminal-%d", i)
		for attempt := 8; attempt >= 1; attempt-- { // order does not matter
			f := a(id, attempt)
			if g := again(id, attempt); g != f {
				t.Fatalf("%s attempt %d: %+v, then %+v", id, attempt, f, g)
			}
			if other(id, attempt) != f {
				differs = true
			}
		}
	}
	if !differs {
		t.Error("seeds 1 and 2 made the same decisions")
	}
}

func TestSeededScriptBounds(t *testing.T) {
	t.Parallel()
	always := couriertest.SeededScript(3, couriertest.ScriptSpec{FirstAttempt503: true, DropAfterCommit: 1})
	for i := range 100 {
		id := fmt.Sprintf("n-%d", i)
		if f := always(id, 1); f != (couriertest.Fault{Status: 503, RetryAfter: "1"}) {
			t.Fatalf("attempt 1 = %+v, want 503 Retry-After 1", f)
		}
		for attempt := 2; attempt <= couriertest.MaxFaultedAttempt; attempt++ {
			if f := always(id, attempt); !f.DropAfterCommit {
				t.Fatalf("attempt %d = %+v, want a drop", attempt, f)
			}
		}
		for attempt := couriertest.MaxFaultedAttempt + 1; attempt <= 20; attempt++ {
			if f := always(id, attempt); f != (couriertest.Fault{}) {
				t.Fatalf("attempt %d = %+v, want no fault", attempt, f)
			}
		}
	}
}

// TestSeededScriptFractions checks the mix over many decisions, for a fixed
// seed (so the test is deterministic).
func TestSeededScriptFractions(t *testing.T) {
	t.Parallel()
	script := couriertest.SeededScript(4, chaos)
	counts := map[string]int{}
	total := 0
	for i := range 4000 {
		id := fmt.Sprintf("terminal-%d", i)
		for attempt := 2; attempt <= couriertest.MaxFaultedAttempt; attempt++ {
			total++
			switch f := script(id, attempt); {
			case f.Status == 429 && f.RetryAfter == "1":
				counts["rate limited"]++
			case f.DropAfterCommit:
				counts["drop"]++
			case f.Delay == chaos.DelayBy:
				counts["delay"]++
			case f.WrongAck:
				counts["wrong ack"]++
			case f == couriertest.Fault{}:
				counts["none"]++
			default:
				t.Fatalf("unexpected fault %+v", f)
			}
		}
	}
	for kind, want := range map[string]float64{
		"rate limited": chaos.RateLimited,
		"drop":         chaos.DropAfterCommit,
		"delay":        chaos.Delay,
		"wrong ack":    chaos.WrongAck,
		"none":         1 - chaos.RateLimited - chaos.DropAfterCommit - chaos.Delay - chaos.WrongAck,
	} {
		if got := float64(counts[kind]) / float64(total); math.Abs(got-want) > 0.02 {
			t.Errorf("%s: %.3f of attempts, want %.3f", kind, got, want)
		}
	}
	// A notification dropped on one attempt is no likelier than any other
	// to be dropped on the next: decisions are independent across attempts.
	dropped, droppedAgain := 0, 0
	for i := range 4000 {
		id := fmt.Sprintf("terminal-%d", i)
		for attempt := 2; attempt < couriertest.MaxFaultedAttempt; attempt++ {
			if script(id, attempt).DropAfterCommit {
				dropped++
				if script(id, attempt+1).DropAfterCommit {
					droppedAgain++
				}
			}
		}
	}
	if got := float64(droppedAgain) / float64(dropped); math.Abs(got-chaos.DropAfterCommit) > 0.03 {
		t.Errorf("after a drop, %.3f of next attempts dropped, want about %.3f", got, chaos.DropAfterCommit)
	}
}

func TestSeededScriptPanicsOnBadSpec(t *testing.T) {
	t.Parallel()
	for name, spec := range map[string]couriertest.ScriptSpec{
		"negative":         {RateLimited: -0.1},
		"over one":         {WrongAck: 1.5},
		"NaN":              {DropAfterCommit: math.NaN()},
		"sum over one":     {RateLimited: 0.6, DropAfterCommit: 0.6},
		"delay without by": {Delay: 0.1},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("SeededScript did not panic")
				}
			}()
			couriertest.SeededScript(1, spec)
		})
	}
}
