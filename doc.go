// Package courier is the vocabulary shared by both ends of courier's
// at-least-once notification contract: delivery statuses and stable error
// codes. A Code is itself an error, and every error courier returns wraps
// its code: a user tests an error's code with errors.Is
// (errors.Is(err, courier.CodeNotFound)) and reads the precise code with
// CodeOf, for a log line or a metric; an application's own error with a
// code wraps it likewise (fmt.Errorf("%w: %s", courier.CodeForbidden,
// msg)). The one exception is the caller's own context:
// a call cut short by its ctx returns ctx's error wrapped, with no code
// (errors.Is(err, context.Canceled) or context.DeadlineExceeded).
//
// The sender side lives in [github.com/courier-go/courier/store] (the outbox,
// written inside the application's own transaction) and
// [github.com/courier-go/courier/client] (the delivery worker). The receiver
// side lives in [github.com/courier-go/courier/handler]. The wire contract
// (canonical JSON, digests, the Ack document) is in
// [github.com/courier-go/courier/ack] and the signing schemes are in
// [github.com/courier-go/courier/signature].
//
// This package performs no I/O and imports nothing outside the standard library.
//
// # Tracing
//
// Tracer is the seam a tracing system plugs into. It is set once, on a
// Store (store.Config.Tracer), and traces everything built on that Store:
// its enqueues, the workers that deliver its outbox and the receivers
// that record into its inbox. A delivery keeps the W3C trace context of the
// transaction that enqueued it, every attempt sends it (traceparent,
// tracestate), and the receiver continues it, so one trace runs from the
// business transaction to the receiver's function. The module
// github.com/courier-go/courier/contrib/otelcourier implements Tracer with
// OpenTelemetry and lists the spans and attributes.
//
// # Log attributes
//
// Courier's parts log through the *slog.Logger of their configs: the
// worker (client.Config.Logger), the receivers
// (handler.ReceiverConfig.Logger and the others), middleware.Recover
// (whose logger middleware.Transaction inside it logs through too) and
// the admin surface (admin.Config.Logger). A part without one logs
// through slog.Default(), its Warn and Error lines only, so that failures
// are heard with no setup; slog.New(slog.DiscardHandler) silences a
// part. The store has no Logger: its lines, for a panic in
// store.Config.Hook or store.Config.Tracer (its methods or its spans'),
// go to slog's default logger at Error. Every line's message starts with
// its part ("worker: ", "handler: ", "middleware: ", "admin: ",
// "store: ") and its attributes
// use these keys and no others. The keys are stable: each means one
// thing, with one type of value, and none is renamed or given another
// meaning in a later version. Values are identities, codes,
// counts, durations and times: never a payload, a header, a key or a secret, and
// an endpoint only as scheme://host (a path shown as "/…": it may be a
// credential) or by its opaque reference.
//
//	delivery      int       the outbox delivery's id
//	attempt       int       the attempt's number, from 1
//	endpoint      string    the endpoint as scheme://host ("/…" for a path), never its userinfo, path or query
//	endpoint_ref  string    the endpoint's opaque reference, which tells apart endpoints shown alike (worker, admin)
//	status        string    the delivery's status after the attempt (worker)
//	http_status   int       an HTTP status: the receiver's (worker), the one answered (handler, admin)
//	code          string    courier's stable code (a Code)
//	attempt_code  string    the attempt's own code, where the delivery ended with another: expired, as the retry it asked for would be due at or past its deadline (worker)
//	remote_code   string    the code of the receiver's problem+json refusal
//	duration      duration  how long the attempt took
//	lease_left    duration  what was left of the lease when an attempt could not start, or its request was not sent
//	timeout       duration  the worker's attempt timeout
//	open_until    time      until when an endpoint's breaker, as it opened, holds its deliveries back (worker)
//	deliveries    int       how many deliveries a release concerned, or a closed Store left to their leases
//	owner         string    the worker's name
//	error         error     the cause of a failure, for operators
//	panic         any       true when a handler, a Hook, a Tracer or a worker's Config function panicked; the recovered value (middleware.Recover)
//	stack         string    the stack of a recovered panic
//	action        string    the operator's action (admin)
//	count         int       how many rows an operator's action changed (admin)
//	id            int       the delivery or subscription an operator acted on (admin)
//	max_in_flight int       the limit of an endpoint's deliveries in flight an operator set, 0 for none (admin)
//	rate          float     the limit of an endpoint's requests per second an operator set, 0 for none (admin)
//	burst         int       the burst of that rate (admin)
package courier
