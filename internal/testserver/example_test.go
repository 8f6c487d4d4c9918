package testserver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/testserver"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// A receiver whose connection drops right after it committed the first
// attempt: the sender sees a network error and retries, the retry is
// answered from the Inbox, and the notification was processed once.
func ExampleNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "testserver-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		panic(err)
	}
	keys := []signature.StandardWebhooksKey{key}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "cms", Keys: keys})
	if err != nil {
		panic(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(keys...)
	if err != nil {
		panic(err)
	}

	srv, err := testserver.New(testserver.Config{
		Store:    st,
		Verifier: verifier,
		Script: func(_ string, attempt int) couriertest.Fault {
			return couriertest.Fault{DropAfterCommit: attempt == 1}
		},
	})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	n, err := ack.NewTerminal(ack.Terminal{
		EventID: "event-1", SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1",
		SourceSequence: "1", JobCount: "1",
		ChangeSHA256:           ack.Digest([]byte("change")),
		LifecycleBindingSHA256: ack.Digest([]byte("binding")),
		TerminalStatus:         "cancelled",
	})
	if err != nil {
		panic(err)
	}
	payload, err := n.Payload()
	if err != nil {
		panic(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req, signature.Message{ID: n.NotificationID, Body: payload, Time: time.Now()}); err != nil {
			panic(err)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			fmt.Printf("attempt %d: connection lost\n", attempt)
			continue
		}
		res.Body.Close()
		fmt.Printf("attempt %d: %d\n", attempt, res.StatusCode)
	}

	effects, err := srv.Effects(ctx)
	if err != nil {
		panic(err)
	}
	stats := srv.Stats()
	fmt.Println("effects:", effects[n.NotificationID], "dropped:", stats.Dropped, "replayed:", stats.Replayed)
	// Output:
	// attempt 1: connection lost
	// attempt 2: 200
	// effects: 1 dropped: 1 replayed: 1
}
