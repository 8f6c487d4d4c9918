package handler_test

import (
	"testing"

	"github.com/courier-go/courier/internal/testmain"
)

// TestMain stops the PostgreSQL server the tests share, and fails the
// run if a test leaves a goroutine running.
func TestMain(m *testing.M) { testmain.Main(m) }
