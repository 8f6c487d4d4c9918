package handler

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestConfigDefaults: a constructor fills what its config leaves zero with
// the documented defaults.
func TestConfigDefaults(t *testing.T) {
	s, v := configFixture(t)
	fn := func(context.Context, *sqlx.Tx, ack.Reporting) error { return nil }
	rp, err := NewReporting(ReportingConfig{Store: s, Verifier: v}, fn)
	if err != nil {
		t.Fatal(err)
	}
	if f := rp.front; f.logger == nil || rp.cfg.StaleAfter != 5*time.Minute || rp.Retention() != 73*time.Hour {
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

// Notification types that are not structs: NewReceiver decodes a body
// into T's fields and validates them, which such a T has none of.
type (
	pointerPayload struct{ ID string }
	mapPayload     map[string]any
	slicePayload   []string
	stringPayload  string
)

func (p *pointerPayload) DedupeKey() string { return p.ID }
func (m mapPayload) DedupeKey() string      { id, _ := m["id"].(string); return id }
func (s slicePayload) DedupeKey() string    { return strings.Join(s, ",") }
func (s stringPayload) DedupeKey() string   { return string(s) }

// TestNewReceiverRefusesANonStructPayload: a NewReceiver whose T was not a
// struct (a pointer to one, a map) built, and then answered every request
// 400 validation_failed naming no field, so its senders failed every
// delivery for good. It is now refused when built, with config_invalid
// naming the type.
func TestNewReceiverRefusesANonStructPayload(t *testing.T) {
	t.Parallel()
	s, v := configFixture(t)
	cfg := ReceiverConfig{Store: s, Verifier: v}
	tests := []struct {
		name string
		open func() error
	}{
		{"*handler.pointerPayload", func() error {
			_, err := NewReceiver(cfg, func(context.Context, *sqlx.Tx, *pointerPayload) error { return nil })
			return err
		}},
		{"handler.mapPayload", func() error {
			_, err := NewReceiver(cfg, func(context.Context, *sqlx.Tx, mapPayload) error { return nil })
			return err
		}},
		{"handler.slicePayload", func() error {
			_, err := NewReceiver(cfg, func(context.Context, *sqlx.Tx, slicePayload) error { return nil })
			return err
		}},
		{"handler.stringPayload", func() error {
			_, err := NewReceiver(cfg, func(context.Context, *sqlx.Tx, stringPayload) error { return nil })
			return err
		}},
		{"ack.Notification", func() error {
			_, err := NewReceiver(cfg, func(context.Context, *sqlx.Tx, ack.Notification) error { return nil })
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.open()
			if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), tt.name) {
				t.Fatalf("NewReceiver[%s] = %v, want config_invalid naming the type", tt.name, err)
			}
		})
	}
	if _, err := NewReceiver(cfg, func(context.Context, *sqlx.Tx, ack.Terminal) error { return nil }); err != nil {
		t.Fatalf("NewReceiver[ack.Terminal], a struct: %v", err)
	}
}

// configFixture is what the config tests build handlers over: a Store on
// a SQLite file, closed when t ends, and a bearer verifier.
func configFixture(t *testing.T) (*store.Store, signature.Verifier) {
	t.Helper()
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
	return s, v
}
