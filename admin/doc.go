// Package admin is the sender side's operations surface over an outbox: a
// JSON API for tools and a server-rendered ops page for people. Both read
// the store's health, deliveries, attempts and endpoint breakers, and
// act on them: redrive failed deliveries (and quarantined ones whose
// payload could not be opened, payload_unreadable, once the payload key
// is fixed; see store.Outbox.Redrive), cancel waiting ones (the API
// every one of an endpoint gone for good at once), enable or disable an
// endpoint, and resolve an endpoint held back by a changed
// contract (pin a digest, or fail the deliveries it holds back).
//
// The mental model: reads are the application's to guard (mount the
// Handler behind its own authentication); every change goes through
// Config.Authorize, and is refused (403 forbidden) when it comes from
// another site, as net/http's CrossOriginProtection judges it: by the
// browser's Sec-Fetch-Site header, or else its Origin against the request's
// Host (a proxy in front must pass Host through). A tool that sends neither
// header, such as curl, is not refused for it: Authorize is its guard. No
// form carries a token and the Handler sets no cookie: a session cookie
// is the application's, and SameSite=Lax or Strict on it keeps another
// site's form post without it in a browser too old to send either header.
// Origin is compared with Host, which names no scheme: serve the Handler
// over https only (HSTS), or a page of the same host over plain http
// passes as the same origin.
//
// The Handler never shows what could be a secret: no payload bytes (only
// their digest), and no endpoint URL in full. An endpoint URL may carry a
// credential in its userinfo, its query or its path (a chat service's
// webhook URL is a capability whose path is the secret), so it is shown
// redacted to scheme and host ("https://hooks.example/…"), and named in forms, API paths and
// bodies by an opaque reference instead: its ref, the first 32 hex
// characters of the SHA-256 of the URL.
// JSON answers carry both: "endpoint" (redacted) and "ref" (or
// "endpoint_ref" on a delivery).
//
// The Handler serves paths relative to where it is mounted, and every
// link, form and redirect it writes is relative, so it works under any
// prefix:
//
//	mux.Handle("/ops/courier/", http.StripPrefix("/ops/courier", h))
//
// (The prefix stripped with its trailing slash, "/ops/courier/", serves the
// same: the Handler reads a path left without its leading slash as the
// same page's.)
//
// The JSON API (errors are application/problem+json with a stable code; a
// database that fails a call, or does not answer a read (GET) within 10
// seconds, is 503 database_unavailable with Retry-After, one whose file
// is damaged 503 database_corrupt without Retry-After, one not set up
// for courier (its tables out of reach, a privilege
// missing) 500 config_invalid saying so, on the page too):
//
//	GET  /api/health                    the outbox's health (a health object)
//	GET  /api/deliveries                {"deliveries": [delivery…], "next_before": id} newest first;
//	                                    query: notification_id (one notification's deliveries,
//	                                    one per endpoint), status, endpoint_ref, since, until
//	                                    (RFC 3339, on the last update; until after since,
//	                                    to the microsecond), before (next_before of
//	                                    the previous page), limit (1..1000, default 100)
//	GET  /api/deliveries/{id}           {"delivery": delivery, "attempts": [attempt…]}
//	POST /api/deliveries/{id}/redrive   a failed delivery, or a quarantined payload_unreadable
//	                                    one, back to pending: {"redriven": 1}; one a redrive does
//	                                    not take is 404 not_found, its detail saying why
//	POST /api/deliveries/{id}/cancel    withdraw a pending or retrying delivery, or dismiss a
//	                                    failed or quarantined one: delivery; one in another
//	                                    state is 404 not_found
//	POST /api/redrive                   {"endpoint_ref": "…"}: the endpoint's failed deliveries
//	                                    and quarantined payload_unreadable ones back to
//	                                    pending; without one ({} or an empty body), every
//	                                    endpoint's (an endpoint_ref that is "" or null is
//	                                    400 validation_failed): {"redriven": n}
//	POST /api/cancel                    {"endpoint_ref": "…"}: cancel every pending, retrying,
//	                                    failed or quarantined delivery of the endpoint (one gone
//	                                    for good, whose deliveries hold the health blocked);
//	                                    endpoint_ref is required, there is no cancel of every
//	                                    endpoint's (left out, "" or null is 400
//	                                    validation_failed): {"cancelled": n}
//	GET  /api/endpoints                 endpoints with something to show (a breaker not plainly
//	                                    healthy, limits, deliveries in flight, blocked ordering
//	                                    keys): {"endpoints": [endpoint…], "next_after": ref}, a
//	                                    page by URL (next_after is the last one's ref); query:
//	                                    after (next_after of the previous page), limit
//	                                    (1..1000, default 100)
//	POST /api/endpoints/{ref}/enable    close the endpoint's breaker: endpoint
//	POST /api/endpoints/{ref}/disable   stop sending to it: endpoint
//	POST /api/endpoints/{ref}/limits    {"max_in_flight": n, "rate": r, "burst": b}: replace the
//	                                    endpoint's limits (store.Limits, 0 for no limit; all
//	                                    zero removes them). max_in_flight and rate are
//	                                    required, so that a body meant to change one cannot
//	                                    remove the other; burst left out or 0 is rate rounded
//	                                    up, and needs a rate: endpoint
//	GET  /api/endpoints/{ref}/blocked-keys
//	                                    the ordering keys a failed delivery holds at the
//	                                    endpoint, each with that delivery, the first 1000 by
//	                                    key: {"blocked_keys": [blocked_key…]}
//	GET  /api/contracts                 contract pins of the source-delivery profile:
//	                                    {"contracts": [contract…], "next_after": ref}, paged
//	                                    as /api/endpoints is
//	POST /api/contracts/{ref}/pin       {"capabilities_sha256": "…"}: pin the endpoint's
//	                                    contract digest (pinning the digest its waiting
//	                                    commands were built for resumes it): contract
//	POST /api/contracts/{ref}/fail-mismatched
//	                                    fail the endpoint's waiting commands enqueued under
//	                                    another digest than its pin: {"failed": n}
//
// The objects' members (times are RFC 3339 in UTC). These are left out
// when zero or empty: health's code; delivery's payload_sha256,
// payload_key_id, key_id, next_attempt_at, deadline, lease_owner,
// leased_at, lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256,
// subscription_id, ordering_key and held (next_attempt_at is written only while the delivery is
// pending or retry_wait: a leased or finished one has no attempt due);
// attempt's http_status, error_code and remote_code;
// endpoint's failing_since, open_until, reason and updated_at; and
// next_before and next_after on the last page. Every other member is
// always written, zero included:
//
//	health    status ("ok" or "blocked"), code, counts (by delivery status), due,
//	          expired_leases, failed, oldest_due_age_seconds, overdue, contract_mismatches,
//	          operations (command deliveries by operation, then status), endpoints (by
//	          breaker state but closed: open, half_open, disabled)
//	delivery  id, notification_id, endpoint (redacted), endpoint_ref, payload_sha256,
//	          payload_key_id (the id of the payload key that sealed it: the key a
//	          payload_unreadable one needs back), profile, key_id, status, priority, attempts,
//	          max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
//	          lease_expires_at, last_error_code, last_status, last_remote_code,
//	          ack_sha256, subscription_id, ordering_key (the key it is sent in
//	          order of, as enqueued), held (why a pending or retrying one waits
//	          although due: "key", behind an earlier delivery of its ordering key,
//	          or "endpoint", for room at its endpoint; store.Delivery.Held),
//	          created_at, updated_at
//	attempt   attempt, owner, leased_at, lease_expires_at, finished_at, duration_ms,
//	          outcome, http_status, error_code, remote_code
//	endpoint  ref, endpoint (redacted), state (closed, open, half_open, disabled),
//	          consecutive_failures, failing_since, open_until, reason, updated_at,
//	          limits {max_in_flight, rate, burst} (0: no limit), in_flight (deliveries
//	          leased now, by every worker), blocked_keys (ordering keys a failed
//	          delivery holds: redrive or cancel it)
//	contract  ref, endpoint (redacted), capabilities_sha256, pinned_at, mismatched
//	          (unfinished deliveries under another digest: the endpoint is held back)
//	blocked_key
//	          head (the failed delivery holding the key: redrive or cancel it), ordering_key,
//	          since
//
// A ref names an endpoint the store knows (one with a breaker record, a
// subscription, a pinned contract or a delivery); another is 404
// not_found. An {id} in a path (the API's or the page's) that is not a
// delivery id, a positive integer, is 400 validation_failed naming id
// (rule min); one no delivery has is 404 not_found.
//
// The ops page (HTML, no scripts, nothing loaded from the network):
//
//	GET  /                              health, contract pins and endpoints (breaker, limits, in
//	                                    flight, blocked keys), each the 100 that most need an
//	                                    operator after a count of all, recent failures and
//	                                    payload_unreadable quarantines (what a redrive takes),
//	                                    a search form
//	GET  /deliveries?notification_id=…  the search: one notification's deliveries
//	GET  /deliveries/{id}               one delivery and its attempts
//	POST /ops/redrive                   form: id, or endpoint_ref, or neither for every failed delivery
//	                                    (with the quarantined payload_unreadable ones, as /api/redrive;
//	                                    an empty id or endpoint_ref is refused); both, that delivery
//	                                    only if it is at that endpoint (404 not_found otherwise)
//	POST /ops/cancel                    form: id
//	POST /ops/endpoints/enable          form: endpoint_ref, or endpoint (a URL an operator typed), not both
//	POST /ops/endpoints/disable         form: endpoint_ref, or endpoint (a URL an operator typed), not both
//	POST /ops/contracts/pin             form: endpoint_ref, capabilities_sha256
//	POST /ops/contracts/fail-mismatched form: endpoint_ref
//
// The form posts answer 303 See Other back to the page. Forms are read
// as strictly as JSON: a field the action does not read, or one given
// twice, is 400 validation_failed (rule unknown or single). JSON bodies
// are read like a receiver's (bounded, one strict JSON document, no
// unknown members); an action above that takes no body (the path names
// all it acts on) takes none, or {}, and refuses a member as any body
// does. A body's Content-Type is sent on one line, naming a form or JSON
// as the action reads: otherwise 415 unsupported_media_type, as for a
// change whose body, a form or JSON, empty or not, is under a content
// coding (Content-Encoding: gzip, say; answered with Accept-Encoding:
// identity, and before Authorize is asked). A query
// parameter that selects what the Admin lists or finds, given twice, is
// refused too (rule single); the JSON API's lists (/api/deliveries,
// /api/endpoints, /api/contracts) refuse a parameter they do not read
// as well (rule unknown), so that a filter misspelled is not answered
// with everything, and the page ignores one. A change reads its path
// and body only, and takes no query: a POST with one is refused, naming
// each parameter (rule query), so that an Authorize that reads the form
// (r.FormValue, which reads the query too) judges what the action reads.
// A query, form or body with a bad field is 400 validation_failed listing
// each ({"errors": [{"field", "rule"}…]}), the first 100 where more failed
// (its detail then says how many), each path at most 256 bytes.
//
// Every answer is bounded, however many endpoints the outbox knows. A
// large outbox keeps tens of thousands of endpoints with something to
// show (one an operator disabled stays until enabled, and one its breaker
// disabled, as every subscriber gone with a 410, until a prune) and a contract pin
// for every endpoint a command was ever enqueued for. The page shows the
// 100 of each that most need an operator, after a line counting them all:
// endpoints failing now (open, half open) first, then those holding
// ordering keys, disabled ones, those failing but closed, and those only
// limited or busy, the latest change first within each; pins holding the
// most deliveries back first, then the latest. The store ranks them and
// counts them all in the database and sends the 100; with no index in
// that order, it reads every endpoint's row and every pin to rank them,
// though none of them is sent (at 50,000 disabled endpoints, each with a
// pin, on SQLite, about an eighth of a second for the page, with the
// allocation of one with 1,000: 1.2 MB). The JSON API pages through every one by
// URL (in the database's order of text: bytes on SQLite, its collation on
// PostgreSQL), each page read from the store's indexes from its cursor on,
// so that a page costs what it shows: at 50,000 disabled endpoints, each
// with a pin, on SQLite, a page of 100 costs about what it does at 1,000
// (BenchmarkAdminManyEndpoints). Its cursor (next_after) is the last
// entry's ref, not its URL, so that it says nothing of a URL (a query
// travels into logs); the Admin's Store remembers the URL of each cursor
// it hands out, so that a cursor holds when its endpoint leaves the list.
// A cursor another process handed out, or one the Store has forgotten (it
// remembers up to 1,024 refs it resolved), is looked up among the
// endpoints the store knows, as a ref in a path is, which reads them; one
// whose endpoint the store no longer knows at all is 404 not_found: start
// again from the first page. Every endpoint listed throughout a walk comes
// once; one added after the cursor comes in its place, one added before it
// does not.
//
// A redrive moves deliveries in batches, each committed on its own: one
// that fails part-way (/api/redrive or the form) has moved the batches
// before for good, and its problem's detail says how many; redriving
// again takes the rest. So does /api/cancel, which cancels an endpoint's
// deliveries one at a time. It cancels those the endpoint had when it
// began: one enqueued to it meanwhile may be left, as may one a worker
// had leased that then fails; one claimed or finished meanwhile is
// skipped.
package admin
