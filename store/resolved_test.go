package store

import (
	"fmt"
	"testing"
)

// TestResolvedRefsAreBounded: the references a Store remembers
// (Endpoints.Resolve) stay at most maxResolved: past that it starts
// again, and remembers the newest.
func TestResolvedRefsAreBounded(t *testing.T) {
	var r resolvedRefs
	for i := range maxResolved + 10 {
		r.put(fmt.Sprint("ref-", i), fmt.Sprint("url-", i))
		if len(r.urls) > maxResolved {
			t.Fatalf("%d references remembered, want at most %d", len(r.urls), maxResolved)
		}
	}
	last := maxResolved + 9
	if url, ok := r.get(fmt.Sprint("ref-", last)); !ok || url != fmt.Sprint("url-", last) {
		t.Errorf("the newest reference = %q, %v; want remembered", url, ok)
	}
}
