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
	refusesURLs(t, "absolute http or https", "naming what -url takes", []string{"notaurl", "ftp://u:hunter2@x.example/y", "/hooks/orders", "https://"})
}

// TestSendURLOnAPortNoDialReaches: a -url on port 0, or on one above
// 65535, is no endpoint the outbox takes either (endpoint.Dialable), and
// -allow-private opens no such port: a usage error, exit 2, saying what
// -url takes, not destination_forbidden with that hint.
func TestSendURLOnAPortNoDialReaches(t *testing.T) {
	t.Setenv("COURIER_SECRET", signature.NewStandardWebhooksSecret())
	refusesURLs(t, "1 to 65535", "naming the port -url takes", []string{"https://x.example:0/h?token=hunter2", "https://x.example:65536/h?token=hunter2", "http://127.0.0.1:99999/h?token=hunter2"})
}

// TestSendURLHostNotAsDialed: a -url whose host is not spelt as a dial
// resolves it (not ASCII, or with a trailing root dot) is no endpoint the
// outbox takes either (endpoint.HostAsDialed), and -allow-private opens no
// such spelling: a usage error, exit 2, saying what host -url takes, not a
// send to the name it maps to.
func TestSendURLHostNotAsDialed(t *testing.T) {
	t.Setenv("COURIER_SECRET", signature.NewStandardWebhooksSecret())
	refusesURLs(t, "A-label", "naming the host -url takes", []string{
		"https://bücher.example/h?token=hunter2",
		"https://b%C3%BCcher.example/h?token=hunter2",
		"https://ｅｘａｍｐｌｅ.com/h?token=hunter2",
		"https://u:hunter2@x.example./h",
		"http://localhost.:8080/h?token=hunter2",
	})
}

// refusesURLs runs send with each of urls as its -url, with and without
// -allow-private, and wants a usage error, exit 2, whose stderr holds
// want, what the check says -url takes, and neither offers
// -allow-private, which opens none of them, nor shows a URL's secret
// (hunter2).
func refusesURLs(t *testing.T, want, naming string, urls []string) {
	t.Helper()
	for _, u := range urls {
		for _, private := range []bool{false, true} {
			args := []string{"send", "-url", u}
			if private {
				args = append(args, "-allow-private")
			}
			code, _, errOut := courierRun(t, args...)
			if code != exitUsage || !strings.Contains(errOut, want) || strings.Contains(errOut, "-allow-private opens") {
				t.Errorf("courier %s: exit %d, want %d %s\nstderr: %s", strings.Join(args, " "), code, exitUsage, naming, errOut)
			}
			if strings.Contains(errOut, "hunter2") {
				t.Errorf("courier %s: stderr shows the URL's secret: %s", strings.Join(args, " "), errOut)
			}
		}
	}
}
