package handler

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestConfigDefaults: a constructor fills what its config leaves zero with
// the documented defaults.
func TestConfigDefaults(t *testing.T) {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	token, err := signature.ParseSecret("t", "0123456789abcdefghijklmnopqrstuvwxyz")
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "s", Tokens: []signature.Secret{token}})
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, *sqlx.Tx, ack.Reporting) error { return nil }
	rp, err := NewReporting(ReportingConfig{Store: s, Verifier: v}, fn)
	if err != nil {
		t.Fatal(err)
	}
	if f := rp.front; f.logger == nil || rp.cfg.StaleAfter != 5*time.Minute || rp.Retention() != 24*time.Hour {
		t.Fatalf("NewReporting with a zero config: front %+v, StaleAfter %v, Retention %v", f, rp.cfg.StaleAfter, rp.Retention())
	}
	p, err := NewPublish(PublishConfig{Store: s, Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Authorize == nil {
		t.Fatal("NewPublish left Authorize unset; want AuthorizeOwnTenant")
	}
}
