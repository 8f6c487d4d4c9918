// Package handler holds courier's http.Handlers for the receiving side of
// a notification contract, and the sender side's publish API:
//
//	Receiver[T]            accepts notifications of a payload type exactly once (ReceiverConfig)
//	Reporting              accepts AdCP webhook envelopes exactly once (ReportingConfig)
//	Source                 applies source-delivery commands exactly once (SourceConfig)
//	Publish                lets other services enqueue notifications (PublishConfig); a
//	                       request with an Idempotency-Key header is answered once
//
// The ops page and admin JSON API over an outbox are package admin.
//
// Every handler checks a request in the same order and refuses it at the
// first failure with an application/problem+json body carrying a stable
// code; nothing is written for a refused request:
//
//	405 method_not_allowed      not POST
//	415 unsupported_media_type  not application/json (a charset, in any case, must be UTF-8),
//	                            or Content-Type sent on more than one line; or a body under a
//	                            content coding (Content-Encoding other than identity: the
//	                            receivers decode none), answered with Accept-Encoding: identity
//	413 body_too_large          over Body.MaxBytes (the rest of the upload is read and
//	                            discarded, bounded, so the client gets this answer)
//	503 server_busy             the bodies in flight would exceed Body.Budget (Retry-After)
//	408 request_timeout         the body did not arrive within Body.ReadTimeout
//	400 invalid_argument        the body could not be read: it ended short of its
//	                            Content-Length (the client went away mid-body), or
//	                            its chunked encoding is broken
//	401 <signature code>        the signature does not verify (WWW-Authenticate says why)
//	503 webhook_signature_revocation_stale
//	                            RFC 9421: the verifier's revocation data is past its refresh
//	                            deadline and grace, so it vouches for no key until it is
//	                            refreshed (no Retry-After; see middleware.Verify)
//	429 webhook_signature_rate_abuse
//	                            RFC 9421: the key holds its cap of live nonces in the replay
//	                            cache; they free as they expire (Retry-After)
//	400 malformed_json, duplicate_json_key, validation_failed (with the failing fields;
//	                            a number no float64 holds, in a valid document: rule finite
//	                            where the body is canonicalized (Reporting; for ack.Terminal,
//	                            Source and Publish, which keep integers exactly as Python
//	                            does, one with a fraction or an exponent, and Publish an
//	                            integer too when it fans out to a reporting subscription),
//	                            rule type in a field of your own type;
//	                            at most 100 fields, each path at most 256 bytes, cut in its
//	                            middle with "…", in one order for one body; when more
//	                            failed, detail says "the first 100 of N")
//	400 validation_failed       Receiver and Source only: notification_id (rule webhook_id):
//	                            the signed message id (webhook-id, or Svix's svix-id) names
//	                            another notification (Reporting dedupes by idempotency_key,
//	                            which a message id a sender gives each delivery need not be)
//	400 message_id_missing      Receiver only: a payload without an id of its own, under a
//	                            scheme that signs no message id to dedupe it by
//
// A request that passes is processed, and one function answers the outcome
// for every handler, so the same failure gets the same answer everywhere:
//
//	409 idempotency_collision   its identity was received before with another body; Publish:
//	                            an event published before with another payload or type (see Publish)
//	503 in_progress             another request is processing it, or Reporting's claim on it
//	                            was lost while it ran (taken over, or pruned): the retry is
//	                            answered (Retry-After)
//	422 <its code>              the application refused it for good (see Reject)
//	500 handler_failed          the application's function failed; the sender retries
//	503 internal_error          the store could not answer (begin, inbox, commit; or under
//	                            the function: its transaction cannot be rolled back, as when
//	                            the database ended its connection, or the database failed
//	                            its statement: full, read-only, an I/O error, a lock
//	                            conflict); Retry-After. Also, before any check, a request
//	                            served inside middleware.Transaction (each handler
//	                            begins its own: serve it beside Transaction)
//	503 payload_unreadable      its record was kept under a payload key the store no longer
//	                            holds, or holds over other bytes (see store.Encryption):
//	                            neither processed again nor answered until the key is
//	                            configured again; Retry-After
//	403 forbidden               Publish only: the caller may not publish to that target
//	500 internal_error          anything else courier did not expect: a Verifier whose
//	                            Principal.Sender no record may hold, say (logged at Error
//	                            with its cause)
//
// An accepted notification is recorded in the Inbox, processed by the
// application's function and acknowledged, all in one transaction; a
// redelivery gets the stored answer byte for byte, without running the
// function again. What makes a redelivery, per handler (the key is always
// scoped by the verified sender):
//
//	Receiver[T]  key T's DedupeKey, or the signed message id when it is "";
//	             same body: the exact bytes (courier's own Ack binds them),
//	             or T's PayloadSHA256 when T is an ack.Digester
//	Receiver[ack.Terminal]
//	             key event_id; same body: the canonical JSON, so the same
//	             notification re-serialized is a redelivery, and another
//	             notification for the event a collision
//	Reporting    key idempotency_key; same body: the JCS form; and for a
//	             task webhook of a terminal status, key task_id and
//	             notification_id too, where set: a re-emission under another
//	             idempotency_key is answered as a duplicate
//	Source       key operation:request_id; same body: the exact bytes
//
// The verified sender is the verifier's Sender, a name you choose: it is
// the dedupe namespace, and receivers that share a Store's Inbox and a
// Sender share it. A notification one of them recorded is, to the other,
// a redelivery, answered from that record without running its function.
// A sender that delivers the same notification (the same id: a courier
// sender's Enqueue of one NotificationID to two endpoints, Svix's one
// message id to every endpoint) to two of your endpoints, each of which
// must process it, needs a Sender per endpoint: give each endpoint's
// receiver a verifier of its own, named for the sender and the endpoint
// ("orders", "orders/audit").
//
// The application's function gets a context marked as holding the store's
// writer (on SQLite the recording transaction holds the one writer until
// the receiver commits): it must write through the tx it is given, and
// leave its commit or rollback to the receiver, which commits it with the
// Inbox record. A function that ends tx itself has failed: the request
// answers 500 handler_failed, logged as such, but for a Source whose
// function committed and returned nil, which stores the command's
// response in a transaction of its own and answers it (logged at Warn).
// What it committed stays, with the Inbox record of a Receiver or a
// Source, so a redelivery is answered from that record. A Reporting
// receiver completes its claim in tx, after the function, so there the
// sender's retry runs the function again (but for a terminal
// notification_id, recorded in tx before the function: the retry is then
// a re-emission, answered as a duplicate); so does a Source's when its
// function failed after committing, or its response could not be stored
// (its record, committed unanswered, is given back).
//
// # Retention
//
// A redelivery is known only while its Inbox record lasts: nothing prunes
// records but store.Inbox.Prune, and a delivery that arrives after its
// record was pruned runs the function again. So does a replay of a
// request signed with Standard Webhooks or AdCP HMAC, which carry no
// nonce, while its timestamp is inside the verifier's tolerance: Prune
// refuses a retention under 24 hours, which outlives the longest
// tolerance a verifier takes, an hour, either way. That floor guards
// against replays alone: 24 hours is shorter than a courier sender on its
// defaults retries, so a receiver pruned that short can run the function
// twice for one notification. Prune with an OlderThan
// longer than the senders may send a delivery again after first
// processing it: a courier sender's retry horizon (store.Config.RetryHorizon,
// 72 hours, or the delivery's own Deadline, up to store.MaxHorizon)
// counted from when its first attempt was due, and an hour more for its
// last attempt's Timeout. A Reporting receiver's Retention is that rule
// for its senders. An operator's store.Outbox.Redrive sends a failed
// delivery again, under the same identity, with a horizon counted anew:
// a notification that was processed although its delivery failed (its
// answer lost, say) runs again when it is redriven after its record was
// pruned. Prune deletes the old records of every receiver sharing the
// Store's Inbox, whatever their sender: prune with the longest retention
// any of them needs.
//
// Each answered request is reported to the config's Hook as an Event (its
// status, outcome and code), traced with the Store's tracer when it has
// one (store.Config.Tracer) and, when refused or failed, logged to its
// Logger: 4xx at Info, 5xx at Error (at Info when it failed because its
// client went away, which ends the request's context: neither the store
// nor the application failed; a context cancelled with a cause of its
// own, as a server's BaseContext may be at shutdown, is no client's
// doing, and is logged at Error with that cause), with the status and code and never any of
// the request's content. Two 503s say come back later, and nothing
// failed: in_progress (another request is processing the notification,
// as concurrent redeliveries do) and server_busy (load shed, which any
// client's slow uploads can bring about) are logged at Info; the Hook
// counts them. A panic in the application's function,
// or in a method of its notification type the receiver calls (DedupeKey,
// Check, UnmarshalJSON, Ack, PayloadSHA256), is reported as 500
// internal_error (what middleware.Recover answers for it) with nothing
// recorded, and then re-raised for the server or an outer
// middleware.Recover. A panic in the Hook or the Logger is not: the answer is written by then,
// so the panic is dropped, with one line at Error, and the answer stands.
// Both run before net/http sends the answer, when the handler returns:
// keep them quick, or the sender waits for them.
//
// # Behind a proxy
//
// A handler reads nothing of where it is mounted: serve it under any path,
// with http.StripPrefix or a ServeMux pattern ("POST /hooks/{tenant}"),
// behind any reverse proxy, over HTTP/1.1 or HTTP/2, its body sent with a
// length or chunked. What a proxy in front must leave alone:
//
//   - the body, byte for byte, and the headers the scheme signs (the
//     signature's own, and for RFC 9421 Content-Type, Content-Digest and
//     the path and query: see the signature package, Behind a proxy, for
//     the verifier's Origin, the proxy's public origin);
//   - the content coding: a body compressed on the way (Content-Encoding
//     other than identity) is refused 415, since a handler decodes none;
//   - the size: a proxy's own limit on request bodies (nginx's
//     client_max_body_size is 1 MiB by default) must be at least
//     Body.MaxBytes, or its own 413, without a problem body, answers first.
//     A body whose length is known (a proxy that buffers whole bodies
//     sends it) and over MaxBytes is refused 413 before a byte of it is
//     read, so a sender waiting on Expect: 100-continue sends none; one of
//     unknown length (chunked) is refused 413 once MaxBytes is passed.
//
// The application's own middleware may wrap a handler (logging, metrics,
// authentication, a recoverer), and wrap its ResponseWriter, as long as
// the wrapper has an Unwrap() http.ResponseWriter method, as
// http.ResponseController expects: Body.ReadTimeout and the discarding of
// a refused body are deadlines set on the connection through it. Through a
// wrapper without Unwrap neither can be set: a body that trickles in is
// read for as long as the server's own ReadTimeout allows (for ever
// without one), and answered 408 only then. A handler served so logs it
// once, at Warn, on its Logger.
//
// Nothing a handler answers depends on X-Forwarded-For, -Host, -Proto or
// Forwarded. Several receiver processes behind one load balancer dedupe
// together only on one shared database (PostgreSQL): give each a Store on
// it, and an RFC 9421 verifier the Store's replay cache
// (store.Store.Replay), so that a request replayed to another process is
// refused there too.
package handler
