// Package couriertest is courier's test kit, in the manner of
// net/http/httptest: what an application's own tests need around courier,
// on real databases and real HTTP over loopback.
//
//   - Server puts scripted faults in front of a receiver (any
//     http.Handler): error answers with Retry-After (Sequence, or a seeded
//     mix with SeededScript), answers held past the sender's timeout,
//     connections dropped after the receiver committed, altered Acks.
//   - Guard opens a client.Guard for exactly one test server: the zero
//     Guard refuses loopback and plain http, as it should in production.
//   - StandardWebhooksKeys, RFC9421Keys, AdCPHMACKeys and BearerKeys give
//     a matched signer and verifier; NewRequest signs a request the way a
//     worker does, to test one's own receiver with httptest.
//   - Drain runs a worker until nothing is due.
//   - Effects records, in the receiver's own database and transaction,
//     what the application's function did, so a test can tell from the
//     database alone that a notification was processed exactly once.
//   - PostgresStore and PostgresURL give each test a fresh PostgreSQL
//     database (a throwaway server, or COURIER_PG_URL); Main stops the
//     server after the tests.
//
// A typical test of a sender against its receiver, both on SQLite (the
// whole of it is ExampleNewServer). The worker's Backoff retries at once:
// with the default, the retry after the 503 would be due in seconds, and
// Drain would return with the delivery waiting for it.
//
//	rcv, _ := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier}, apply)
//	srv := couriertest.NewServer(rcv, couriertest.Sequence(couriertest.Fault{Status: 503}))
//	defer srv.Close()
//	w, _ := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport(),
//		Backoff: func(int, time.Duration) time.Duration { return 0 }})
//	couriertest.Drain(ctx, w) // then assert on the receiver's side: applied once, after one 503
//
// Faults count toward the endpoint's circuit breaker as the same failures
// from a real receiver would: a Status of 5xx, 408, 425 or 429, a Delay
// past the sender's timeout and a DropAfterCommit count against it, a 410
// disables it, and another 4xx Status or a WrongAck, being answers, show
// it up and end the count. The count is of failed attempts in a row,
// whichever notifications they belong to: five (store.BreakerConfig's
// default Threshold) open the endpoint, as three notifications each
// scripted a 500 and then a DropAfterCommit do. The endpoint then pauses
// for its Cooldown, and Drain returns with the deliveries waiting in
// retry_wait, their Delivery.Held "endpoint". Give such tests a Store
// whose Breaker.Threshold is higher than the failed attempts they inject.
//
// No test needs to sleep for courier's waits. A retry's backoff and
// Retry-After, a breaker's Cooldown and a delivery's deadline are all
// stamped and compared on the outbox Store's clock (store.Config.Now): a
// test that gives it a settable clock moves it past the wait and drains
// again (ExampleDrain_clock). Only an attempt's Timeout, against a Delay
// fault, runs on real time: give the worker a short one. The fake time of
// testing/synctest does not serve instead: a bubble's clock moves only
// while every goroutine in it is durably blocked, and one waiting on a
// network connection (a Server's, a worker's request) never is, so with a
// Server started in the bubble a sleep never returns.
package couriertest
