package client_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// order is what the plan receiver accepts.
type order struct {
	NotificationID string `json:"notification_id" validate:"required"`
	Plan           string `json:"plan" validate:"required"`
}

func (o order) DedupeKey() string { return o.NotificationID }

// TestWorkerKeepsTheReceiversCode is the finding "the receiver's own code
// is lost": a courier receiver refuses with handler.Reject("plan_unknown",
// …) or its own validation_failed, and the sender keeps that code beside
// its own, on the delivery, the attempts log, the worker's event and its
// log line; nothing else of the body is kept.
func TestWorkerKeepsTheReceiversCode(t *testing.T) {
	t.Parallel()
	const detail = "no plan named platinum-SECRET-DETAIL"
	var rcv http.Handler
	logs := &lockedBuffer{}
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) { rcv.ServeHTTP(w, r) }, func(c *client.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	inbox, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inbox.Close() })
	rcv, err = handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: b.verifier}, func(ctx context.Context, tx *sqlx.Tx, o order) error {
		if o.Plan != "gold" {
			return handler.Reject("plan_unknown", detail)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		id, payload string
		status      courier.Status
		code        courier.Code
		remote      courier.Code
		http        int
	}{
		{"n-plan", `{"notification_id":"n-plan","plan":"platinum"}`, courier.StatusFailed, courier.CodeReceiverRejected, "plan_unknown", 422},
		{"n-invalid", `{"notification_id":"n-invalid"}`, courier.StatusFailed, courier.CodeReceiverRejected, courier.CodeValidation, 400},
		{"n-ok", `{"notification_id":"n-ok","plan":"gold"}`, courier.StatusSucceeded, "", "", 200},
	}
	for _, tt := range tests {
		id := b.enqueue(t, tt.id, tt.payload)
		e := b.work(t)
		if e.Status != tt.status || e.Code != tt.code || e.RemoteCode != tt.remote || e.HTTPStatus != tt.http {
			t.Errorf("%s: event %+v, want %s/%q remote %q HTTP %d", tt.id, e, tt.status, tt.code, tt.remote, tt.http)
		}
		d := b.get(t, id)
		if d.Status != tt.status || d.LastErrorCode != tt.code || d.LastRemoteCode != tt.remote {
			t.Errorf("%s: delivery %s/%q remote %q, want %s/%q remote %q", tt.id, d.Status, d.LastErrorCode, d.LastRemoteCode, tt.status, tt.code, tt.remote)
		}
		attempts, err := b.store.Outbox.Attempts(t.Context(), id)
		if err != nil || len(attempts) != 1 || attempts[0].RemoteCode != tt.remote {
			t.Errorf("%s: attempts %+v, %v; want one with remote code %q", tt.id, attempts, err, tt.remote)
		}
	}
	if !strings.Contains(logs.String(), `"remote_code":"plan_unknown"`) {
		t.Errorf("no log line names the remote code:\n%s", logs)
	}
	var stored []string
	if err := b.store.DB().Select(&stored, "SELECT COALESCE(last_remote_code, '') FROM courier_outbox UNION ALL SELECT COALESCE(remote_code, '') FROM courier_attempts"); err != nil {
		t.Fatal(err)
	}
	for name, hay := range map[string]string{"logs": logs.String(), "store": strings.Join(stored, "\n")} {
		if strings.Contains(hay, "SECRET-DETAIL") || strings.Contains(hay, "platinum") {
			t.Errorf("the %s keep body content beyond the code", name)
		}
	}
}

// TestWorkerKeepsOnlyAValidProblemCode: the code is taken only from an
// application/problem+json body of at most 4 KiB, parsed strictly, when
// it is a valid code; a retried refusal keeps its code too.
func TestWorkerKeepsOnlyAValidProblemCode(t *testing.T) {
	t.Parallel()
	problem := func(status int, contentType, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			w.Write([]byte(body))
		}
	}
	const pj = "application/problem+json"
	big := `{"code":"plan_unknown","detail":"` + strings.Repeat("x", 4<<10) + `"}`
	tests := []struct {
		name    string
		respond http.HandlerFunc
		status  courier.Status
		remote  courier.Code
	}{
		{"problem", problem(422, pj, `{"type":"about:blank","status":422,"code":"plan_unknown"}`), courier.StatusFailed, "plan_unknown"},
		{"media type parameters", problem(422, "Application/Problem+JSON; charset=utf-8", `{"code":"plan_unknown"}`), courier.StatusFailed, "plan_unknown"},
		{"retried", problem(503, pj, `{"code":"in_progress"}`), courier.StatusRetryWait, courier.CodeInProgress},
		{"plain json", problem(422, "application/json", `{"code":"plan_unknown"}`), courier.StatusFailed, ""},
		{"not a code", problem(422, pj, `{"code":"Plan Unknown!"}`), courier.StatusFailed, ""},
		{"code not a string", problem(422, pj, `{"code":42}`), courier.StatusFailed, ""},
		{"nested code only", problem(422, pj, `{"errors":{"code":"plan_unknown"}}`), courier.StatusFailed, ""},
		{"duplicate member", problem(422, pj, `{"code":"a_code","code":"b_code"}`), courier.StatusFailed, ""},
		{"malformed", problem(422, pj, `{"code":"plan_unknown"`), courier.StatusFailed, ""},
		{"over 4 KiB", problem(422, pj, big), courier.StatusFailed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupWorker(t, tt.respond, nil)
			id := b.enqueue(t, "n-1", `{}`)
			if e := b.work(t); e.RemoteCode != tt.remote || e.Status != tt.status {
				t.Fatalf("event %+v, want %s with remote code %q", e, tt.status, tt.remote)
			}
			if d := b.get(t, id); d.LastRemoteCode != tt.remote {
				t.Fatalf("delivery remote code %q, want %q", d.LastRemoteCode, tt.remote)
			}
		})
	}
}

// TestClassifySeesTheWholeRefusal: reading the code does not take the
// body from a Classify of one's own.
func TestClassifySeesTheWholeRefusal(t *testing.T) {
	t.Parallel()
	body := `{"code":"plan_unknown","retry":"yes"}`
	seen := make(chan string, 1)
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(422)
		w.Write([]byte(body))
	}, func(c *client.Config) {
		c.Classify = func(resp *http.Response, err error) client.Verdict {
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			seen <- buf.String()
			return client.DefaultClassify(resp, err)
		}
	})
	b.enqueue(t, "n-1", `{}`)
	if e := b.work(t); e.RemoteCode != "plan_unknown" {
		t.Fatalf("event %+v", e)
	}
	if got := <-seen; got != body {
		t.Fatalf("Classify read %q, want the whole body", got)
	}
}
