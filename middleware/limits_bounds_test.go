package middleware_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
)

// TestBodyLimitsBounds: Validate refuses each value no request could be
// read with, config_invalid naming the field, negative sizes and durations
// included; zero fields and the bounds themselves pass.
func TestBodyLimitsBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field  string
		limits middleware.BodyLimits
	}{
		{"BodyLimits.MaxBytes", middleware.BodyLimits{MaxBytes: -1}},
		{"BodyLimits.ReadTimeout", middleware.BodyLimits{ReadTimeout: -time.Nanosecond}},
		{"BodyLimits.LingerTimeout", middleware.BodyLimits{LingerTimeout: -time.Second}},
		{"BodyLimits.LingerBytes", middleware.BodyLimits{LingerBytes: -1}},
		{"BodyLimits.Budget", middleware.BodyLimits{Budget: &middleware.Budget{}}},
		{"BodyLimits.Budget", middleware.BodyLimits{Budget: middleware.NewBudget(1<<20 - 1)}},
		{"BodyLimits.Budget", middleware.BodyLimits{MaxBytes: 2, Budget: middleware.NewBudget(1)}},
	} {
		err := tc.limits.Validate()
		if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate(%+v) = %v; want config_invalid naming %s", tc.limits, err, tc.field)
		}
	}
	for _, l := range []middleware.BodyLimits{{}, {MaxBytes: 1, Budget: middleware.NewBudget(1)}, {MaxBytes: 1 << 30}} {
		if err := l.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v; want nil", l, err)
		}
	}
}

// TestReadBodyRefusesAMaxBytesTheSharedBudgetCannotHold: with no Budget
// of its own, a MaxBytes over the shared 64 MiB panics with config_invalid
// naming the Budget, as ReadBody says, rather than answering 503 forever.
func TestReadBodyRefusesAMaxBytesTheSharedBudgetCannotHold(t *testing.T) {
	t.Parallel()
	defer func() {
		err, _ := recover().(error)
		if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), "BodyLimits.Budget") {
			t.Errorf("ReadBody with MaxBytes 64 MiB + 1 and no Budget: panic %v; want config_invalid naming BodyLimits.Budget", err)
		}
	}()
	r := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
	middleware.ReadBody(httptest.NewRecorder(), r, middleware.BodyLimits{MaxBytes: 64<<20 + 1})
}
