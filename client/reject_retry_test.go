package client_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestARejectionIsFinalUnderTheDefaultClassifyOnly: handler.Reject's
// 422 fails the delivery for good under DefaultClassify, keeping the
// receiver's code; a sender whose Classify is RetryClientErrors retries
// it like any 4xx, as Reject's doc says.
func TestARejectionIsFinalUnderTheDefaultClassifyOnly(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		classify func(*http.Response, error) client.Verdict
		status   courier.Status
	}{
		{"DefaultClassify", nil, courier.StatusFailed},
		{"RetryClientErrors", client.RetryClientErrors, courier.StatusRetryWait},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rcv http.Handler
			b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) { rcv.ServeHTTP(w, r) }, func(c *client.Config) {
				c.Classify = tt.classify
			})
			inbox, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { inbox.Close() })
			rcv, err = handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: b.verifier}, func(context.Context, *sqlx.Tx, order) error {
				return handler.Reject("plan_unknown", "")
			})
			if err != nil {
				t.Fatal(err)
			}
			id := b.enqueue(t, "n-1", `{"notification_id":"n-1","plan":"platinum"}`)
			if e := b.work(t); e.HTTPStatus != http.StatusUnprocessableEntity || e.RemoteCode != "plan_unknown" {
				t.Fatalf("event %+v, want a 422 with remote code plan_unknown", e)
			}
			if d := b.get(t, id); d.Status != tt.status || d.LastRemoteCode != "plan_unknown" {
				t.Errorf("delivery %s (remote code %q), want %s", d.Status, d.LastRemoteCode, tt.status)
			}
		})
	}
}
