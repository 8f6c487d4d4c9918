package storetest

import (
	"errors"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
)

// testResolveRemembersWhatItFound: a reference Resolve found resolves
// again without a read of the store (an operator's tool names one
// endpoint again and again, and each time read every endpoint the store
// knows, the outbox's too): here its only delivery is deleted behind the
// store's back, and the reference still resolves, to the same URL, in
// this Store; a Store opened afresh does not know it. An unknown
// reference is not found, each time.
func testResolveRemembersWhatItFound(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	url := "https://quiet.example/h"
	d := b.enqueue(t, at(url, "only"))
	ref := endpoint.Ref(url)
	if got, err := b.store.Endpoints.Resolve(b.ctx, ref); err != nil || got != url {
		t.Fatalf("Resolve = %q, %v; want %q", got, err, url)
	}
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("DELETE FROM courier_outbox WHERE id = ?"), d.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := b.store.Endpoints.Resolve(b.ctx, ref); err != nil || got != url {
		t.Errorf("Resolve again = %q, %v; want %q, remembered", got, err, url)
	}
	fresh, err := store.Open(b.ctx, b.db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.Endpoints.Resolve(b.ctx, ref); !errors.Is(err, courier.CodeNotFound) {
		t.Errorf("Resolve in a Store opened afresh = %v, want not found", err)
	}
	unknown := endpoint.Ref("https://unknown.example/h")
	for range 2 {
		if _, err := b.store.Endpoints.Resolve(b.ctx, unknown); !errors.Is(err, courier.CodeNotFound) {
			t.Errorf("Resolve of an unknown reference = %v, want not found", err)
		}
	}
}
