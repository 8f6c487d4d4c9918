package store_test

import (
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestNilDatabaseIsAConfigError: Open and Migrate refuse a nil database
// as every constructor refuses a missing Store, with config_invalid,
// rather than panic.
func TestNilDatabaseIsAConfigError(t *testing.T) {
	t.Parallel()
	if _, err := store.Open(t.Context(), nil, store.Config{}); courier.CodeOf(err) != courier.CodeConfigInvalid {
		t.Errorf("Open(nil) = %v, want config_invalid", err)
	}
	if err := store.Migrate(t.Context(), nil); courier.CodeOf(err) != courier.CodeConfigInvalid {
		t.Errorf("Migrate(nil) = %v, want config_invalid", err)
	}
}
