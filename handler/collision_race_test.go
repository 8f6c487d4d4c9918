package handler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
)

// TestACollisionWhileTheFirstIsOpenWaitsForItsOutcome: a notification
// arrives with other bytes under the id of one whose first delivery is
// still being processed, its transaction open (on PostgreSQL the other
// waits for the first's record; on SQLite for the one writer). If the
// first commits, the other is an idempotency collision (409), written
// nowhere; if the first fails, nothing of it stays and the other is
// processed as the notification, after which a retry of the first is the
// collision. Either way the function's effect is written once, and only
// the bytes processed get the Ack.
func TestACollisionWhileTheFirstIsOpenWaitsForItsOutcome(t *testing.T) {
	t.Parallel()
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			s := openEngine(t, engine.postgres)
			effects, err := couriertest.NewEffects(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			verifier, signer := anyStandardWebhooks(t)
			for _, firstFails := range []bool{false, true} {
				name := map[bool]string{false: "the first commits", true: "the first fails"}[firstFails]
				t.Run(name, func(t *testing.T) {
					first := blocked()
					first.fail = firstFails
					st := &steps{all: []*step{first}}
					rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier},
						func(ctx context.Context, tx *sqlx.Tx, n stressNote) error {
							if err := effects.Record(ctx, tx, n.ID); err != nil {
								return err
							}
							return st.next(ctx)
						})
					if err != nil {
						t.Fatal(err)
					}
					srv := httptest.NewServer(rcv)
					t.Cleanup(srv.Close)
					t.Cleanup(st.resumeAll)
					id := "collide-" + map[bool]string{false: "a", true: "b"}[firstFails]
					send := func(amount string) answered {
						return doRequest(t, srv, couriertest.NewRequest(srv.URL, id, []byte(`{"id":"`+id+`","amount":`+amount+`}`), signer))
					}
					firstDone := async(func() answered { return send("1") })
					<-first.started
					otherDone := async(func() answered { return send("2") })
					if engine.postgres {
						waitForLockWaiters(t, s.DB(), 1)
					}
					first.resume()
					one, other := <-firstDone, <-otherDone
					processed := one
					if firstFails {
						wantStatus(t, "first", one, http.StatusInternalServerError, courier.CodeHandlerFailed)
						processed = other
						wantStatus(t, "other", other, http.StatusOK, "")
						wantStatus(t, "the first's retry", send("1"), http.StatusConflict, courier.CodeIdempotencyCollision)
					} else {
						wantStatus(t, "first", one, http.StatusOK, "")
						wantStatus(t, "other", other, http.StatusConflict, courier.CodeIdempotencyCollision)
					}
					retry := map[bool]string{false: "1", true: "2"}[firstFails]
					if again := send(retry); again.status != http.StatusOK || string(again.body) != string(processed.body) {
						t.Fatalf("a retry of the bytes processed: %d %q, want 200 %q", again.status, again.body, processed.body)
					}
					if n := effectsCount(t, effects, id)(); n != 1 {
						t.Fatalf("%d effects, want 1", n)
					}
					wantCompleted(t, s, 1, id)
				})
			}
		})
	}
}
