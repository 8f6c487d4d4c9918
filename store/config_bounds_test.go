package store_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestConfigBounds: each value outside a field's documented bounds is
// refused with config_invalid naming the field, negative durations and
// counts included.
func TestConfigBounds(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		field string
		cfg   store.Config
	}{
		{"MaxAttempts", store.Config{MaxAttempts: -1}},
		{"MaxAttempts", store.Config{MaxAttempts: 1001}},
		{"RetryHorizon", store.Config{RetryHorizon: -time.Hour}},
		{"RetryHorizon", store.Config{RetryHorizon: store.MaxHorizon + 1}},
		{"Durability", store.Config{Durability: 7}},
		{"OrderingOnFailure", store.Config{OrderingOnFailure: 7}},
		{"Breaker.Threshold", store.Config{Breaker: store.BreakerConfig{Threshold: -1}}},
		{"Breaker.Cooldown", store.Config{Breaker: store.BreakerConfig{Cooldown: -time.Second}}},
		{"Breaker.Cooldown", store.Config{Breaker: store.BreakerConfig{Cooldown: time.Millisecond - 1}}},
		{"Breaker.Cooldown", store.Config{Breaker: store.BreakerConfig{Cooldown: store.MaxHorizon + 1}}},
		{"Breaker.DisableAfter", store.Config{Breaker: store.BreakerConfig{DisableAfter: -time.Hour}}},
		{"Breaker.DisableAfter", store.Config{Breaker: store.BreakerConfig{DisableAfter: time.Millisecond - 1}}},
	} {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), tc.cfg)
		if err == nil {
			s.Close()
		}
		if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), "Config."+tc.field) {
			t.Errorf("case %d: Open with %s out of bounds: %v; want config_invalid naming Config.%s", i, tc.field, err, tc.field)
		}
	}
}

// TestConfigDefaultsApplied: zero fields take the documented defaults,
// and the bounds themselves are accepted.
func TestConfigDefaultsApplied(t *testing.T) {
	t.Parallel()
	open := func(cfg store.Config) store.Config {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), cfg)
		if err != nil {
			t.Fatalf("Open(%+v): %v", cfg, err)
		}
		defer s.Close()
		return store.ConfigOf(s)
	}
	c := open(store.Config{})
	want := store.BreakerConfig{Threshold: 5, Cooldown: 30 * time.Second, DisableAfter: 72 * time.Hour}
	if c.MaxAttempts != 8 || c.RetryHorizon != 72*time.Hour || c.Breaker != want ||
		c.Durability != store.DurabilityFull || c.OrderingOnFailure != store.OrderingHoldKey || c.Profiles == nil {
		t.Fatalf("defaults: %+v", c)
	}
	open(store.Config{MaxAttempts: 1000, RetryHorizon: store.MaxHorizon,
		Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Millisecond, DisableAfter: time.Millisecond}})
	open(store.Config{Breaker: store.BreakerConfig{Cooldown: store.MaxHorizon}})
}

// TestNewPayloadKeyRefusesAZeroSecret: 32 zero bytes, a secret buffer
// that was never filled, are refused with config_invalid, as a secret of
// the wrong size is; a secret with one byte set is a key.
func TestNewPayloadKeyRefusesAZeroSecret(t *testing.T) {
	t.Parallel()
	secret := make([]byte, 32)
	if _, err := store.NewPayloadKey("k1", secret); courier.CodeOf(err) != courier.CodeConfigInvalid {
		t.Errorf("NewPayloadKey over 32 zero bytes = %v, want config_invalid", err)
	}
	secret[31] = 1
	if _, err := store.NewPayloadKey("k1", secret); err != nil {
		t.Errorf("NewPayloadKey over a secret with one byte set: %v", err)
	}
}
