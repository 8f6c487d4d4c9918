package client

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// boundsConfig returns a valid Config over a SQLite file store.
func boundsConfig(t *testing.T) Config {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	key, err := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Store: s, Signer: signer}
}

// TestConfigBounds: each value outside a field's documented bounds is
// refused with config_invalid naming the field, negative durations and
// counts included.
func TestConfigBounds(t *testing.T) {
	base := boundsConfig(t)
	for _, tc := range []struct {
		field string
		set   func(*Config)
	}{
		{"Owner", func(c *Config) { c.Owner = "a b" }},
		{"Owner", func(c *Config) { c.Owner = strings.Repeat("a", 257) }},
		{"Concurrency", func(c *Config) { c.Concurrency = -1 }},
		{"BatchSize", func(c *Config) { c.BatchSize = -1 }},
		{"BatchSize", func(c *Config) { c.BatchSize = 1001 }},
		{"EndpointConcurrency", func(c *Config) { c.EndpointConcurrency = -1 }},
		{"EndpointConcurrency", func(c *Config) { c.Concurrency, c.BatchSize, c.EndpointConcurrency = 4, 4, 5 }},
		{"Timeout", func(c *Config) { c.Timeout = -time.Second }},
		{"Timeout", func(c *Config) { c.Timeout = 9 * time.Millisecond }},
		{"Timeout", func(c *Config) { c.Timeout = time.Hour + 1 }},
		{"PollInterval", func(c *Config) { c.PollInterval = -time.Second }},
		{"PollInterval", func(c *Config) { c.PollInterval = 9 * time.Millisecond }},
		{"PollInterval", func(c *Config) { c.PollInterval = time.Hour + 1 }},
		{"Lease", func(c *Config) { c.Lease = -time.Minute }},
		{"Lease", func(c *Config) { c.Lease = 24*time.Hour + 1 }},
		{"Lease", func(c *Config) { c.Timeout, c.Lease = 10*time.Second, 10*time.Second+99*time.Millisecond }},
		{"Lease", func(c *Config) { c.Timeout, c.Lease = 10*time.Second, 11*time.Second-1 }},
		// Both signers: SignerFor took every attempt, and the Signer set
		// beside it signed none, without a word.
		{"SignerFor", func(c *Config) {
			c.SignerFor = func(context.Context, string) (signature.Signer, error) { return c.Signer, nil }
		}},
	} {
		cfg := base
		tc.set(&cfg)
		_, err := NewWorker(cfg)
		if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), "Config."+tc.field) {
			t.Errorf("NewWorker with %s out of bounds: %v; want config_invalid naming Config.%s", tc.field, err, tc.field)
		}
	}
}

// TestConfigDefaultsApplied: zero fields take the documented defaults, and
// any Concurrency at least 1 is accepted with the others left zero.
func TestConfigDefaultsApplied(t *testing.T) {
	base := boundsConfig(t)
	w, err := NewWorker(base)
	if err != nil {
		t.Fatal(err)
	}
	c := w.cfg
	if c.Owner == "" || c.Concurrency != 16 || c.BatchSize != 16 || c.EndpointConcurrency != 8 ||
		c.Timeout != 15*time.Second || c.Lease != time.Minute || c.PollInterval != time.Second ||
		c.Transport == nil || c.Classify == nil || c.Backoff == nil || c.Logger == nil || c.Now == nil {
		t.Fatalf("defaults: %+v", c)
	}
	for _, tc := range []struct {
		concurrency, batch, endpoint int
	}{{1, 1, 1}, {15, 15, 8}, {2000, 1000, 1000}, {math.MaxInt, 1000, math.MaxInt - math.MaxInt/2}} {
		cfg := base
		cfg.Concurrency = tc.concurrency
		w, err := NewWorker(cfg)
		if err != nil {
			t.Errorf("Concurrency %d: %v", tc.concurrency, err)
			continue
		}
		if w.cfg.BatchSize != tc.batch || w.cfg.EndpointConcurrency != tc.endpoint {
			t.Errorf("Concurrency %d: BatchSize %d, EndpointConcurrency %d; want %d, %d",
				tc.concurrency, w.cfg.BatchSize, w.cfg.EndpointConcurrency, tc.batch, tc.endpoint)
		}
	}
	cfg := base
	cfg.Timeout = time.Hour
	w, err = NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.cfg.Lease != 4*time.Hour {
		t.Fatalf("Timeout 1h: Lease %v; want 4h", w.cfg.Lease)
	}
}

// TestConfigBoundsAreInclusive: each documented bound is itself accepted:
// the limits of BatchSize, Timeout and PollInterval, an Owner of 256
// bytes, an EndpointConcurrency of max(Concurrency, BatchSize), and a
// Lease exactly Timeout plus max(Timeout/10, 100ms), or 24 hours.
func TestConfigBoundsAreInclusive(t *testing.T) {
	base := boundsConfig(t)
	for name, set := range map[string]func(*Config){
		"Owner of 256 bytes":          func(c *Config) { c.Owner = strings.Repeat("a", 256) },
		"Owner of 1 byte":             func(c *Config) { c.Owner = "a" },
		"BatchSize 1":                 func(c *Config) { c.BatchSize = 1 },
		"BatchSize 1000":              func(c *Config) { c.BatchSize = 1000 },
		"EndpointConcurrency 1":       func(c *Config) { c.EndpointConcurrency = 1 },
		"EndpointConcurrency = Conc":  func(c *Config) { c.Concurrency, c.BatchSize, c.EndpointConcurrency = 8, 4, 8 },
		"EndpointConcurrency = Batch": func(c *Config) { c.Concurrency, c.BatchSize, c.EndpointConcurrency = 4, 8, 8 },
		"Timeout 10ms":                func(c *Config) { c.Timeout = 10 * time.Millisecond },
		"Timeout 1h":                  func(c *Config) { c.Timeout = time.Hour },
		"PollInterval 10ms":           func(c *Config) { c.PollInterval = 10 * time.Millisecond },
		"PollInterval 1h":             func(c *Config) { c.PollInterval = time.Hour },
		"Lease Timeout+Timeout/10":    func(c *Config) { c.Timeout, c.Lease = 10*time.Second, 11*time.Second },
		"Lease Timeout+100ms":         func(c *Config) { c.Timeout, c.Lease = 500*time.Millisecond, 600*time.Millisecond },
		"Lease 24h":                   func(c *Config) { c.Timeout, c.Lease = time.Hour, 24*time.Hour },
	} {
		cfg := base
		set(&cfg)
		if _, err := NewWorker(cfg); err != nil {
			t.Errorf("NewWorker with %s: %v", name, err)
		}
	}
	cfg := base
	cfg.Timeout, cfg.Lease = 500*time.Millisecond, 600*time.Millisecond-1
	if _, err := NewWorker(cfg); courier.CodeOf(err) != courier.CodeConfigInvalid {
		t.Errorf("NewWorker with Lease 1ns short of Timeout+100ms: %v, want config_invalid", err)
	}
}
