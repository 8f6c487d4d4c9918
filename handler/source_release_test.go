package handler_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/protocol"
)

// failingInbox is a Store's Inbox whose completion and release of a
// record fail, as a database that went away fails them.
type failingInbox struct {
	protocol.Inbox
	releases atomic.Int32
}

var errGone = fmt.Errorf("%w: the database went away", courier.CodeDatabaseUnavailable)

func (f *failingInbox) Complete(context.Context, protocol.DBTX, protocol.InboxKey, []byte) error {
	return errGone
}

func (f *failingInbox) ReleaseClaim(context.Context, protocol.InboxClaim) error {
	f.releases.Add(1)
	return errGone
}

// TestSourceGivesBackNoRecordItRolledBack: a Source whose function ran
// and whose record's completion then failed rolled its transaction back,
// record and all, and then, its bookkeeping saying otherwise, gave the
// record back as one the function had committed: on a database that
// refused the release too (the likeliest reason the completion failed),
// the answer waited out the release's retries, and "claim not released"
// was logged at Error for a claim that did not exist. Not parallel: it
// puts a fault in front of its Store's Inbox (protocol.WrapInbox).
func TestSourceGivesBackNoRecordItRolledBack(t *testing.T) {
	b := setupSource(t)
	failing := new(failingInbox)
	restore := protocol.WrapInbox(func(s any, in protocol.Inbox) protocol.Inbox {
		if s != b.store {
			return in
		}
		failing.Inbox = in
		return failing
	})
	defer restore()
	body := sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"a":1}`)
	if status, code, out := b.post(t, "change:r1", body, 1); status != http.StatusServiceUnavailable || code != string(courier.CodeInternal) {
		t.Fatalf("answered %d %s; want 503 internal_error, which the sender retries", status, out)
	}
	if n := failing.releases.Load(); n != 0 {
		t.Errorf("a record the request had rolled back was released %d times", n)
	}
	for _, msg := range b.logs.Messages(slog.LevelError) {
		if strings.Contains(msg, "not released") {
			t.Errorf("logged %q for a record the request had rolled back", msg)
		}
	}
}
