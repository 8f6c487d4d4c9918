package store_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestPublishEventIDBoundAsDocumented: MaxEventIDSize is 236, as the
// docs of PublishParams.EventID and the publish API say, so that
// EventID ":" the largest subscription id is a 256-character token; an
// EventID of 236 characters is taken and one of 237 is refused with
// invalid_argument naming the field.
func TestPublishEventIDBoundAsDocumented(t *testing.T) {
	t.Parallel()
	if store.MaxEventIDSize != 236 {
		t.Fatalf("MaxEventIDSize = %d, documented as 236", store.MaxEventIDSize)
	}
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	publish := func(size int) error {
		tx, err := s.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		_, err = s.Outbox.Publish(t.Context(), tx, store.PublishParams{
			Tenant: "acme", EventType: "order.paid", EventID: strings.Repeat("e", size), Payload: []byte(`{}`),
		})
		return err
	}
	if err := publish(store.MaxEventIDSize); err != nil {
		t.Fatalf("an EventID of %d characters: %v", store.MaxEventIDSize, err)
	}
	err = publish(store.MaxEventIDSize + 1)
	if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "EventID") {
		t.Fatalf("an EventID of %d characters: %v, want invalid_argument naming EventID", store.MaxEventIDSize+1, err)
	}
}
