package client_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/courier-go/courier/client"
)

// TestAWorkerSaysTheEnvironmentsProxyIsNotUsed: a company whose egress
// must go through a proxy sets HTTPS_PROXY, which the guard's transport
// never reads (it checks the addresses it connects to): every attempt
// then fails network_error on a dial timeout, and nothing said why. A
// worker on a Guard's transport warns once, naming the variable and not
// its value (a proxy URL may hold credentials); one on a transport of its
// own, which may read it, says nothing.
func TestAWorkerSaysTheEnvironmentsProxyIsNotUsed(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://egress:hunter2@proxy.internal:3128")
	for _, tc := range []struct {
		name      string
		transport http.RoundTripper
		warnings  int
	}{
		{"the default transport", nil, 1},
		{"a Guard's", client.Guard{AllowHTTP: true}.Transport(), 1},
		{"one of its own", http.DefaultTransport, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := newCapture(t)
			w, err := client.NewWorker(client.Config{Store: openOutbox(t), Signer: newSigner(t), Transport: tc.transport, Logger: slog.New(logs)})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := w.Work(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			var warned []string
			for _, r := range logs.lines("") {
				if strings.Contains(r.Message, "PROXY") {
					warned = append(warned, r.Message)
				}
			}
			if len(warned) != tc.warnings {
				t.Fatalf("%d warnings about the proxy after two Works, want %d: %q", len(warned), tc.warnings, warned)
			}
			for _, msg := range warned {
				if !strings.Contains(msg, "HTTPS_PROXY is set and not used") || strings.Contains(msg, "hunter2") || strings.Contains(msg, "proxy.internal") {
					t.Errorf("warning %q: want the variable named, never its value", msg)
				}
			}
		})
	}
}
