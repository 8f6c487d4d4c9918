package couriertest_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// note is a payload deduped by its signed webhook-id.
type note struct {
	Type string `json:"type" validate:"required"`
}

func (note) DedupeKey() string { return "" }

// TestServerKeepsTheReceiversBodyDeadline: the fault layer served the
// receiver into a recorder that did not reach the connection, so
// the receiver's Body.ReadTimeout could not be set: a body that stopped
// arriving held the request until the client gave up, where the receiver
// alone answers 408. Behind the fault layer the receiver now answers as
// it does in production, whatever the scheme: one that sends no id header
// (AdCP HMAC, Bearer) had its body read whole by the fault layer, for the
// id to count attempts under, before the receiver could bound it.
func TestServerKeepsTheReceiversBodyDeadline(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		keys couriertest.Keys
	}{
		{"Standard Webhooks", couriertest.StandardWebhooksKeys("billing")},
		{"AdCP HMAC", couriertest.AdCPHMACKeys("billing")},
		{"Bearer", couriertest.BearerKeys("billing")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: tt.keys.Verifier,
				Body: middleware.BodyLimits{ReadTimeout: 200 * time.Millisecond}},
				func(context.Context, *sqlx.Tx, note) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			srv := couriertest.NewServer(rcv, nil)
			defer srv.Close()

			sendStalledBody(t, srv.URL, tt.keys.Signer)
		})
	}
}

// TestStatsCountTheReceiversTimeoutAnswer: a receiver's 408 to a body that
// stopped arriving is an answer sent, and the sender reads it, but Stats
// counted it under 0, as if the client had hung up: the body's read
// deadline ends the request's context as a client gone does.
func TestStatsCountTheReceiversTimeoutAnswer(t *testing.T) {
	t.Parallel()
	keys := couriertest.StandardWebhooksKeys("billing")
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier,
		Body: middleware.BodyLimits{ReadTimeout: 200 * time.Millisecond}},
		func(context.Context, *sqlx.Tx, note) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, nil)
	defer srv.Close()

	sendStalledBody(t, srv.URL, keys.Signer)
	if st := srv.Stats(); st.ByStatus[http.StatusRequestTimeout] != 1 || st.ByStatus[0] != 0 {
		t.Fatalf("Stats.ByStatus = %v after the receiver answered 408, want 408: 1 and nothing under 0", st.ByStatus)
	}
}

// sendStalledBody sends the server at url a signed request's headers and
// the first bytes of its body, then nothing, and fails t unless the
// answer is 408.
func sendStalledBody(t *testing.T, url string, signer signature.Signer) {
	t.Helper()
	body := []byte(`{"type":"invoice.paid"}`)
	req := couriertest.NewRequest(url, "msg-1", body, signer)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", req.Host, len(body))
	for name, values := range req.Header {
		fmt.Fprintf(conn, "%s: %s\r\n", name, values[0])
	}
	fmt.Fprintf(conn, "\r\n%s", body[:5])
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a body that stopped arriving: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a body that stopped arriving: %d, want 408", resp.StatusCode)
	}
}
