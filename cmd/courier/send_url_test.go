package main

import (
	"strings"
	"testing"

	"github.com/courier-go/courier/signature"
)

// TestSendURLNotAnEndpoint: a -url that no endpoint could be (relative, or
// of another scheme than http and https) is a usage error, exit 2, saying
// what -url takes, not a destination_forbidden failure whose hint offers
// -allow-private, which opens no such URL.
func TestSendURLNotAnEndpoint(t *testing.T) {
	t.Setenv("COURIER_SECRET", signature.NewStandardWebhooksSecret())
	for _, u := range []string{"notaurl", "ftp://u:hunter2@x.example/y", "/hooks/orders", "https://"} {
		for _, private := range []bool{false, true} {
			args := []string{"send", "-url", u}
			if private {
				args = append(args, "-allow-private")
			}
			code, _, errOut := courierRun(t, args...)
			if code != exitUsage || !strings.Contains(errOut, "absolute http or https") || strings.Contains(errOut, "-allow-private opens") {
				t.Errorf("courier %s: exit %d, want %d naming what -url takes\nstderr: %s", strings.Join(args, " "), code, exitUsage, errOut)
			}
			if strings.Contains(errOut, "hunter2") {
				t.Errorf("courier %s: stderr shows the URL's password: %s", strings.Join(args, " "), errOut)
			}
		}
	}
}
