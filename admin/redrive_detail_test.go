package admin

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier"
)

// TestRedriveOfOneNotTakenSaysWhy: the ops form may name a delivery and an
// endpoint_ref both (an Authorize may read either); a failed delivery of
// another endpoint is not taken, and the refusal said "no delivery with
// this id that can be redriven: failed, … (it is failed)", naming a status
// a redrive takes as the reason it was not taken. It now says the delivery
// is not at the endpoint the form names, and nothing changes.
func TestRedriveOfOneNotTakenSaysWhy(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	id := b.failed(t, "n-1", hookA)
	other := b.failed(t, "n-2", hookB) // so that the store knows refB
	resp, body := b.do(t, http.MethodPost, "/ops/redrive", "id="+strconv.FormatInt(id, 10)+"&endpoint_ref="+refB, nil)
	refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
	if detail := string(body); strings.Contains(detail, "it is failed") || !strings.Contains(detail, "endpoint_ref") {
		t.Errorf("a failed delivery of another endpoint than endpoint_ref's: %s; want a detail saying it is at another endpoint", body)
	}
	if st, o := b.status(t, id), b.status(t, other); st != courier.StatusFailed || o != courier.StatusFailed {
		t.Fatalf("the deliveries are %s and %s, want both left failed", st, o)
	}

	// A failed delivery Redrive leaves, its 1,000 attempts made (the row as
	// a long history leaves it): the detail says so, not that it is failed.
	if _, err := b.store.DB().Exec("UPDATE courier_outbox SET attempts = 1000, max_attempts = 1000 WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	resp, body = b.do(t, http.MethodPost, "/api/deliveries/"+strconv.FormatInt(id, 10)+"/redrive", "", nil)
	refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
	if !strings.Contains(string(body), "leaves it") {
		t.Errorf("a failed delivery of 1,000 attempts: %s; want a detail saying Redrive leaves it", body)
	}
	if st := b.status(t, id); st != courier.StatusFailed {
		t.Fatalf("the delivery is %s, want it left failed", st)
	}
}
