package courier_test

import (
	"regexp"
	"testing"

	"github.com/courier-go/courier/internal/codetest"
)

// TestEveryCodeHasACodesForm: the form Code's doc gives, which a sender
// keeps a receiver's code in, holds for every code courier declares.
func TestEveryCodeHasACodesForm(t *testing.T) {
	t.Parallel()
	form := regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,127}$`)
	names, codes := codetest.Declared(t)
	for i, code := range codes {
		if !form.MatchString(string(code)) {
			t.Errorf("%s = %q has not a code's form", names[i], code)
		}
	}
}
