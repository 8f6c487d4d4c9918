package handler

import (
	"testing"
	"time"
)

// TestConfigDefaults: a constructor fills what its config leaves zero with
// the documented defaults, and never writes to the caller's config.
func TestConfigDefaults(t *testing.T) {
	var c ReportingConfig
	d := c.withDefaults()
	if d.Body.MaxBytes != 1<<20 || d.Body.Budget == nil || d.StaleAfter != 5*time.Minute || d.Logger == nil {
		t.Fatalf("ReportingConfig.withDefaults = %+v", d)
	}
	if c.Logger != nil || c.Body.Budget != nil {
		t.Fatal("withDefaults wrote to the caller's config")
	}
	for name, d := range map[string]struct {
		maxBytes int64
		logged   bool
	}{
		"ReceiverConfig": {ReceiverConfig{}.withDefaults().Body.MaxBytes, ReceiverConfig{}.withDefaults().Logger != nil},
		"SourceConfig":   {SourceConfig{}.withDefaults().Body.MaxBytes, SourceConfig{}.withDefaults().Logger != nil},
		"PublishConfig":  {PublishConfig{}.withDefaults().Body.MaxBytes, PublishConfig{}.withDefaults().Logger != nil},
	} {
		if d.maxBytes != 1<<20 || !d.logged {
			t.Errorf("%s.withDefaults: MaxBytes %d, logger set %v", name, d.maxBytes, d.logged)
		}
	}
}
