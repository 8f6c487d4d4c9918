package promcourier_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
