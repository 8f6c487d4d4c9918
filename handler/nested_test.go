package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
)

// TestAReceiverInsideARequestsTransactionAnswersAtOnce: a receiver begins
// a transaction of its own. Served inside middleware.Transaction (whose
// transaction holds a connection of the pool for the whole request), on
// PostgreSQL it waited for a second connection: on a pool of one
// (db.SetMaxOpenConns(1)), and on any pool with as many such requests in
// flight as connections, every request waited for one that never came,
// until its client gave up. On SQLite the same setup was answered 503 at
// once (the request holds the one writer). Each engine answers it so now,
// before the store is asked anything, and nothing is recorded.
func TestAReceiverInsideARequestsTransactionAnswersAtOnce(t *testing.T) {
	t.Parallel()
	for _, postgres := range []bool{false, true} {
		name := map[bool]string{false: "sqlite", true: "postgres"}[postgres]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openEngine(t, postgres)
			if postgres {
				s.DB().SetMaxOpenConns(1)
			}
			key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
			if err != nil {
				t.Fatal(err)
			}
			verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "cms-host", Keys: []signature.StandardWebhooksKey{key}})
			signer, _ := signature.NewStandardWebhooksSigner(key)
			var calls int
			rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(context.Context, *sqlx.Tx, ack.Terminal) error {
				calls++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(middleware.Transaction(s.Begin)(rcv))
			t.Cleanup(srv.Close)

			n, body := terminal(t, "event-1")
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if err := signer.Sign(req, signature.Message{ID: n.NotificationID, Body: body, Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("a receiver inside middleware.Transaction: %v; want an answer", err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			var p struct {
				Code   courier.Code
				Detail string
			}
			_ = json.Unmarshal(out, &p)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || p.Code != courier.CodeInternal {
				t.Fatalf("answered %d (Retry-After %q) %s; want 503 internal_error with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), out)
			}
			if !strings.Contains(p.Detail, "middleware.Transaction") {
				t.Fatalf("the answer's detail %q does not say what to mend (a Logger may be nil): want it to name middleware.Transaction", p.Detail)
			}
			if calls != 0 {
				t.Fatalf("the function ran %d times; want none", calls)
			}
			var recorded int
			if err := s.DB().GetContext(ctx, &recorded, "SELECT count(*) FROM courier_inbox"); err != nil {
				t.Fatal(err)
			}
			if recorded != 0 {
				t.Fatalf("%d inbox records; want none", recorded)
			}
		})
	}
}

// TestAReceiverOnAPoolOfOneAnswersEveryRequest: on PostgreSQL a
// receiver's request holds one connection of the pool, for its
// transaction, and asks for no other. On a pool of one, more requests
// than connections, redeliveries of one notification among them, queue
// for it and are all answered, each notification processed once.
func TestAReceiverOnAPoolOfOneAnswersEveryRequest(t *testing.T) {
	t.Parallel()
	s := openEngine(t, true)
	s.DB().SetMaxOpenConns(1)
	if _, err := s.DB().Exec("CREATE TABLE effects (notification_id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "cms-host", Keys: []signature.StandardWebhooksKey{key}})
	signer, _ := signature.NewStandardWebhooksSigner(key)
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (notification_id) VALUES ($1)", n.NotificationID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const notifications, copies = 8, 3
	type result struct {
		id     string
		status int
		body   []byte
		err    error
	}
	results := make(chan result, notifications*copies)
	for i := range notifications {
		n, body := terminal(t, "event-"+string(rune('a'+i)))
		for range copies {
			go func() {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
				if err != nil {
					results <- result{err: err}
					return
				}
				req.Header.Set("Content-Type", "application/json")
				if err := signer.Sign(req, signature.Message{ID: n.NotificationID, Body: body, Time: time.Now()}); err != nil {
					results <- result{err: err}
					return
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					results <- result{err: err}
					return
				}
				defer resp.Body.Close()
				out, err := io.ReadAll(resp.Body)
				results <- result{id: n.NotificationID, status: resp.StatusCode, body: out, err: err}
			}()
		}
	}
	acks := map[string][]byte{}
	for range notifications * copies {
		r := <-results
		if r.err != nil {
			t.Fatalf("a request on a pool of one: %v; want an answer", r.err)
		}
		if r.status != http.StatusOK {
			t.Fatalf("%s answered %d %s; want 200", r.id, r.status, r.body)
		}
		if first, ok := acks[r.id]; ok && !bytes.Equal(first, r.body) {
			t.Fatalf("%s answered %s and %s; want one Ack", r.id, first, r.body)
		}
		acks[r.id] = r.body
	}
	var effects int
	if err := s.DB().GetContext(ctx, &effects, "SELECT count(*) FROM effects"); err != nil {
		t.Fatal(err)
	}
	if effects != notifications {
		t.Fatalf("%d effects; want %d, one per notification", effects, notifications)
	}
}

// TestReportingOnAPoolOfOneAnswersEveryRequest: a Reporting receiver
// claims a key in a statement of its own, then processes it in a
// transaction, each step on one connection at a time. On a PostgreSQL
// pool of one, more requests than connections, terminal re-emissions and
// copies of one key among them, are all answered: 200, or 503 in_progress
// with Retry-After for a copy another request holds, whose retry gets
// 200. Each key is processed once.
func TestReportingOnAPoolOfOneAnswersEveryRequest(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{postgres: true})
	b.store.DB().SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	const keys, copies = 8, 3
	send := func(body []byte) (int, string, []byte, error) {
		req := b.request(t, body).WithContext(ctx) //nolint:contextcheck // the request is built, then given ctx
		resp, err := b.server.Client().Do(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), out, err
	}
	type result struct {
		body   []byte
		status int
		out    []byte
		err    error
	}
	results := make(chan result, keys*copies)
	for i := range keys {
		body := taskWebhook(fmt.Sprintf("whk_pool_of_one_%04d", i), fmt.Sprintf("n_%d", i), "completed")
		for range copies {
			go func() {
				status, retryAfter, out, err := send(body)
				if err == nil && status == http.StatusServiceUnavailable && retryAfter == "" {
					err = fmt.Errorf("503 without Retry-After: %s", out)
				}
				results <- result{body, status, out, err}
			}()
		}
	}
	for range keys * copies {
		r := <-results
		for r.err == nil && r.status == http.StatusServiceUnavailable && bytes.Contains(r.out, []byte(courier.CodeInProgress)) && ctx.Err() == nil {
			r.status, _, r.out, r.err = send(r.body) // the sender's retry
		}
		if r.err != nil {
			t.Fatalf("a request on a pool of one: %v; want an answer", r.err)
		}
		if r.status != http.StatusOK {
			t.Fatalf("answered %d %s; want 200", r.status, r.out)
		}
	}
	if _, effects := b.written(t); effects != keys {
		t.Fatalf("%d effects; want %d, one per key", effects, keys)
	}
}
