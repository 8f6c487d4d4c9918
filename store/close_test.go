package store_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestCloseConcurrently: a Store is safe for concurrent use, Close too: a
// shutdown path and a deferred Close running together close each thing
// the Store opened once, without a race.
func TestCloseConcurrently(t *testing.T) {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { errs <- s.Close() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}
