package handler

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/middleware"
)

type boundsPayload struct {
	ID string `json:"id"`
}

func (p boundsPayload) DedupeKey() string { return p.ID }

// TestConfigBounds: each constructor refuses a value outside its config's
// documented bounds with config_invalid naming the field, negative
// durations and sizes included.
func TestConfigBounds(t *testing.T) {
	s, v := configFixture(t)
	digest := strings.Repeat("a", 64)
	receiver := func(b middleware.BodyLimits) error {
		_, err := NewReceiver(ReceiverConfig{Store: s, Verifier: v, Body: b}, func(context.Context, *sqlx.Tx, boundsPayload) error { return nil })
		return err
	}
	reporting := func(c ReportingConfig) error {
		c.Store, c.Verifier = s, v
		_, err := NewReporting(c, func(context.Context, *sqlx.Tx, ack.Reporting) error { return nil })
		return err
	}
	source := func(c SourceConfig) error {
		c.Store, c.Verifier = s, v
		_, err := NewSource(c, func(context.Context, *sqlx.Tx, ack.Command) error { return nil })
		return err
	}
	publish := func(b middleware.BodyLimits) error {
		_, err := NewPublish(PublishConfig{Store: s, Verifier: v, Body: b})
		return err
	}
	for _, tc := range []struct {
		field string
		err   error
	}{
		{"ReceiverConfig.Body|BodyLimits.MaxBytes", receiver(middleware.BodyLimits{MaxBytes: -1})},
		{"ReceiverConfig.Body|BodyLimits.ReadTimeout", receiver(middleware.BodyLimits{ReadTimeout: -time.Second})},
		{"ReceiverConfig.Body|BodyLimits.LingerTimeout", receiver(middleware.BodyLimits{LingerTimeout: -time.Second})},
		{"ReceiverConfig.Body|BodyLimits.LingerBytes", receiver(middleware.BodyLimits{LingerBytes: -1})},
		{"ReceiverConfig.Body|BodyLimits.Budget", receiver(middleware.BodyLimits{Budget: middleware.NewBudget(1<<20 - 1)})},
		{"ReceiverConfig.Body|BodyLimits.Budget", receiver(middleware.BodyLimits{Budget: &middleware.Budget{}})},
		{"ReceiverConfig.Store", func() error {
			_, err := NewReceiver(ReceiverConfig{Verifier: v}, func(context.Context, *sqlx.Tx, boundsPayload) error { return nil })
			return err
		}()},
		{"ReceiverConfig.Verifier", func() error {
			_, err := NewReceiver(ReceiverConfig{Store: s}, func(context.Context, *sqlx.Tx, boundsPayload) error { return nil })
			return err
		}()},
		{"ReportingConfig.RetryHorizon", reporting(ReportingConfig{RetryHorizon: -time.Hour})},
		{"ReportingConfig.StaleAfter", reporting(ReportingConfig{StaleAfter: -time.Second})},
		// A claim left by a receiver that died must go stale while the
		// sender still retries, or every retry is answered in_progress.
		{"ReportingConfig.StaleAfter", reporting(ReportingConfig{StaleAfter: 72 * time.Hour})},
		{"ReportingConfig.StaleAfter", reporting(ReportingConfig{RetryHorizon: time.Hour, StaleAfter: 2 * time.Hour})},
		{"ReportingConfig.StaleAfter", reporting(ReportingConfig{RetryHorizon: time.Minute})},
		{"ReportingConfig.Body|BodyLimits.ReadTimeout", reporting(ReportingConfig{Body: middleware.BodyLimits{ReadTimeout: -1}})},
		{"SourceConfig.CapabilitiesSHA256", source(SourceConfig{})},
		{"SourceConfig.CapabilitiesSHA256", source(SourceConfig{CapabilitiesSHA256: strings.ToUpper(digest)})},
		{"SourceConfig.Body|BodyLimits.MaxBytes", source(SourceConfig{CapabilitiesSHA256: digest, Body: middleware.BodyLimits{MaxBytes: -1}})},
		{"PublishConfig.Body|BodyLimits.LingerBytes", publish(middleware.BodyLimits{LingerBytes: -1})},
		{"PublishConfig.Store", func() error { _, err := NewPublish(PublishConfig{Verifier: v}); return err }()},
	} {
		named := tc.err != nil
		for _, f := range strings.Split(tc.field, "|") { // the config's field, then the BodyLimits field within it
			named = named && strings.Contains(tc.err.Error(), f)
		}
		if courier.CodeOf(tc.err) != courier.CodeConfigInvalid || !named {
			t.Errorf("%s out of bounds: %v; want config_invalid naming it", tc.field, tc.err)
		}
	}
}

// TestReportingRetentionOfALongHorizon: a RetryHorizon has no upper bound,
// and the Retention it calls for is never shorter than it, however long.
func TestReportingRetentionOfALongHorizon(t *testing.T) {
	s, v := configFixture(t)
	for _, h := range []time.Duration{time.Hour, 72 * time.Hour, 400 * 24 * time.Hour, math.MaxInt64 - time.Minute, math.MaxInt64} {
		rp, err := NewReporting(ReportingConfig{Store: s, Verifier: v, RetryHorizon: h}, func(context.Context, *sqlx.Tx, ack.Reporting) error { return nil })
		if err != nil {
			t.Fatalf("RetryHorizon %v: %v", h, err)
		}
		if r := rp.Retention(); r < h || r < 24*time.Hour {
			t.Errorf("RetryHorizon %v: Retention %v, shorter than the horizon", h, r)
		}
	}
}
