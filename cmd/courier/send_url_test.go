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

// TestSendURLOnAPortNoDialReaches: a -url on port 0, or on one above
// 65535, is no endpoint the outbox takes either (endpoint.Dialable), and
// -allow-private opens no such port: a usage error, exit 2, saying what
// -url takes, not destination_forbidden with that hint.
func TestSendURLOnAPortNoDialReaches(t *testing.T) {
	t.Setenv("COURIER_SECRET", signature.NewStandardWebhooksSecret())
	for _, u := range []string{"https://x.example:0/h?token=hunter2", "https://x.example:65536/h?token=hunter2", "http://127.0.0.1:99999/h?token=hunter2"} {
		for _, private := range []bool{false, true} {
			args := []string{"send", "-url", u}
			if private {
				args = append(args, "-allow-private")
			}
			code, _, errOut := courierRun(t, args...)
			if code != exitUsage || !strings.Contains(errOut, "1 to 65535") || strings.Contains(errOut, "-allow-private opens") {
				t.Errorf("courier %s: exit %d, want %d naming the port -url takes\nstderr: %s", strings.Join(args, " "), code, exitUsage, errOut)
			}
			if strings.Contains(errOut, "hunter2") {
				t.Errorf("courier %s: stderr shows the URL's token: %s", strings.Join(args, " "), errOut)
			}
		}
	}
}

// TestSendURLHostNotAsDialed: a -url whose host is not spelt as a dial
// resolves it (not ASCII, or with a trailing root dot) is no endpoint the
// outbox takes either (endpoint.HostAsDialed), and -allow-private opens no
// such spelling: a usage error, exit 2, saying what host -url takes, not a
// send to the name it maps to.
func TestSendURLHostNotAsDialed(t *testing.T) {
	t.Setenv("COURIER_SECRET", signature.NewStandardWebhooksSecret())
	for _, u := range []string{
		"https://bücher.example/h?token=hunter2",
		"https://b%C3%BCcher.example/h?token=hunter2",
		"https://ｅｘａｍｐｌｅ.com/h?token=hunter2",
		"https://u:hunter2@x.example./h",
		"http://localhost.:8080/h?token=hunter2",
	} {
		for _, private := range []bool{false, true} {
			args := []string{"send", "-url", u}
			if private {
				args = append(args, "-allow-private")
			}
			code, _, errOut := courierRun(t, args...)
			if code != exitUsage || !strings.Contains(errOut, "A-label") || strings.Contains(errOut, "-allow-private opens") {
				t.Errorf("courier %s: exit %d, want %d naming the host -url takes\nstderr: %s", strings.Join(args, " "), code, exitUsage, errOut)
			}
			if strings.Contains(errOut, "hunter2") {
				t.Errorf("courier %s: stderr shows the URL's credential: %s", strings.Join(args, " "), errOut)
			}
		}
	}
}
