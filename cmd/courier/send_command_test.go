package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
)

// TestSendCommandProfile: `courier send -profile command` sends a command
// a handler.Source takes, and checks its answer: it never set
// Courier-Attempt, which every Source requires, so it could never succeed.
func TestSendCommandProfile(t *testing.T) {
	secret := signature.NewStandardWebhooksSecret()
	t.Setenv("COURIER_SECRET", secret)
	key, _ := signature.ParseStandardWebhooksKey("k", secret)
	verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "cli", Keys: []signature.StandardWebhooksKey{key}})
	_, inbox := migrated(t)
	caps := strings.Repeat("ab", 32)
	src, err := handler.NewSource(handler.SourceConfig{Store: inbox, Verifier: verifier, CapabilitiesSHA256: caps},
		func(context.Context, *sqlx.Tx, ack.Command) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(src.ServeHTTP))
	defer srv.Close()

	c, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: "r-1", SourceMaxAttempts: 3,
		CapabilitiesSHA256: caps, Body: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(c)
	code, out, errOut := courierRun(t, "send", "-url", srv.URL+"/source", "-id", c.DedupeKey(), "-body", string(body),
		"-profile", ack.ProfileCommand, "-allow-private")
	if code != exitOK || !strings.Contains(out, "ack: valid") {
		t.Fatalf("send -profile command: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
