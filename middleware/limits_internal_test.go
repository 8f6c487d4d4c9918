package middleware

import (
	"testing"
	"time"
)

// TestBodyLimitsDefaulted checks the defaults Verify applies: the values
// BodyLimits' field docs give, a Budget of its own for each call, a given
// Budget kept, and limits that stay valid.
func TestBodyLimitsDefaulted(t *testing.T) {
	t.Parallel()
	d := BodyLimits{}.defaulted()
	if d.MaxBytes != 1<<20 || d.ReadTimeout != 10*time.Second ||
		d.LingerTimeout != 5*time.Second || d.LingerBytes != 32<<20 ||
		d.Budget == nil || d.Budget.Size() != 64<<20 {
		t.Errorf("defaulted = %+v", d)
	}
	if a, b := (BodyLimits{}).defaulted(), (BodyLimits{}).defaulted(); a.Budget == b.Budget {
		t.Error("two defaulted limits share one Budget; each must have its own")
	}
	shared := NewBudget(1 << 20)
	if got := (BodyLimits{Budget: shared}).defaulted(); got.Budget != shared {
		t.Error("defaulted replaced a given Budget")
	}
	for _, l := range []BodyLimits{{}, {MaxBytes: 1, Budget: NewBudget(1)}, {MaxBytes: 1 << 30}} {
		if err := l.defaulted().Validate(); err != nil {
			t.Errorf("defaulted().Validate(%+v) = %v, want nil", l, err)
		}
	}
}
