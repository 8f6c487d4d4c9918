package main

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/signature"
)

// benchPayload is the body of the deliveries filled in bulk: the same
// bytes for every row, each delivery with its own notification id.
var benchPayload = []byte(`{"amount":1250,"currency":"EUR","event":"order.paid","notification_id":"n","schema":"courier.bench.v1"}`)

// note is the notification the courier receivers accept: courier's own
// Ack profile, deduped by notification_id, validated like any payload.
type note struct {
	Schema         string `json:"schema" validate:"eq=courier.bench.v1"`
	NotificationID string `json:"notification_id" validate:"courier_token"`
	Event          string `json:"event" validate:"required,max=64"`
	Amount         int64  `json:"amount" validate:"gte=0"`
	Currency       string `json:"currency" validate:"len=3"`
}

// DedupeKey implements ack.Notification.
func (n note) DedupeKey() string { return n.NotificationID }

// bareRequests returns the requests of a bare POST loop: the bodies, each
// with its notification id in webhook-id, unsigned.
func bareRequests(ids []string, body func(i int) []byte) []benchkit.Request {
	out := make([]benchkit.Request, len(ids))
	for i, id := range ids {
		out[i] = benchkit.Request{ID: id, Body: body(i)}
	}
	return out
}

// signedRequests returns the requests with Standard Webhooks headers
// signed now by signer.
func signedRequests(signer signature.Signer, ids []string, body func(i int) []byte) ([]benchkit.Request, error) {
	out := make([]benchkit.Request, len(ids))
	now := time.Now()
	for i, id := range ids {
		b := body(i)
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req, signature.Message{ID: id, Body: b, Time: now}); err != nil {
			return nil, err
		}
		out[i] = benchkit.Request{ID: id, Body: b, Header: req.Header}
	}
	return out, nil
}

// keys returns a Standard Webhooks signer and the verifier for it.
func keys() (signature.Signer, signature.Verifier, error) {
	key, err := signature.ParseStandardWebhooksKey("bench", signature.NewStandardWebhooksSecret())
	if err != nil {
		return nil, nil, err
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return nil, nil, err
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "bench-sender", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		return nil, nil, err
	}
	return signer, verifier, nil
}

// ids returns n notification ids prefix0..prefix(n-1).
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// postLoop is benchkit.PostLoop over a transport of its own.
func postLoop(ctx context.Context, target string, reqs []benchkit.Request, concurrency int) (time.Duration, error) {
	tr := benchkit.Transport(concurrency)
	defer tr.CloseIdleConnections()
	return benchkit.PostLoop(ctx, &http.Client{Transport: tr}, target, reqs, concurrency)
}
