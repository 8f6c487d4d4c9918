package examplecheck_test

import (
	"testing"

	"github.com/courier-go/courier/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m) }
