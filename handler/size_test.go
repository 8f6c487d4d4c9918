package handler_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// commandOfSize returns a change command whose payload is exactly n bytes.
func commandOfSize(t *testing.T, requestID string, n int) []byte {
	t.Helper()
	build := func(pad int) []byte {
		c, err := ack.NewCommand(ack.Command{
			Operation: ack.OperationChange, RequestID: requestID, SourceMaxAttempts: 2, CapabilitiesSHA256: sourceDigest,
			Body: json.RawMessage(`{"x":"` + strings.Repeat("a", pad) + `"}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Payload()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := build(n - len(build(0)))
	if len(b) != n {
		t.Fatalf("built a command of %d bytes, want %d", len(b), n)
	}
	return b
}

// TestEveryCommandEnqueuedFitsADefaultSource: the outbox took commands of
// up to 4 MiB while a Source reads 1 MiB unless configured otherwise, so a
// command between the two was enqueued, answered 413 body_too_large at its
// first attempt and failed for good, though courier made both ends with
// their defaults. EnqueueCommand now refuses what a default Source would:
// the largest command it takes is applied, one byte more is refused at
// enqueue, nothing written.
func TestEveryCommandEnqueuedFitsADefaultSource(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		calls := new(atomic.Int32)
		token, err := signature.ParseSecret("host", publishToken)
		if err != nil {
			t.Fatal(err)
		}
		verifier, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "host-1", Tokens: []signature.Secret{token}})
		if err != nil {
			t.Fatal(err)
		}
		src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: verifier, CapabilitiesSHA256: sourceDigest}, anyApp[ack.Command](calls, anyOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		server := httptest.NewServer(src)
		t.Cleanup(server.Close)
		send := func(body []byte) (*http.Response, []byte) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, server.URL, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+publishToken)
			req.Header.Set(ack.AttemptHeader, "1")
			return exchange(t, server, req)
		}
		const sourceReads = 1 << 20 // a Source's default Body.MaxBytes

		// One byte over what a default Source reads: it answers 413, and
		// the outbox refuses the command before anything is written.
		over := commandOfSize(t, "r-over", sourceReads+1)
		resp, out := send(over)
		wantProblemCode(t, resp, out, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge, "")
		_, err = s.Outbox.EnqueueCommand(t.Context(), s.DB(), store.CommandParams{Endpoint: "https://source.example/c", Payload: over})
		var ve *ack.ValidationError
		if courier.CodeOf(err) != courier.CodeRequestInvalid || !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Rule != "size" {
			t.Fatalf("EnqueueCommand of %d bytes = %v, want request_invalid, rule size: a default Source refuses it 413 at every attempt", len(over), err)
		}
		if n := rows(t, s, "courier_outbox"); n != 0 {
			t.Fatalf("the refused command wrote %d deliveries", n)
		}

		// The largest the outbox takes: enqueued, and applied.
		largest := commandOfSize(t, "r-largest", sourceReads)
		if _, err := s.Outbox.EnqueueCommand(t.Context(), s.DB(), store.CommandParams{Endpoint: "https://source.example/c", Payload: largest}); err != nil {
			t.Fatalf("EnqueueCommand of %d bytes: %v", len(largest), err)
		}
		resp, out = send(largest)
		if resp.StatusCode != http.StatusOK || calls.Load() != 1 {
			t.Fatalf("the Source answers the largest command %d %s after %d calls, want 200 and one", resp.StatusCode, out, calls.Load())
		}
		if err := verifyCommand(largest, 1, out); err != nil {
			t.Fatalf("the response does not verify: %v", err)
		}
	})
}
