// Package promcourier exposes courier's metrics through the Prometheus
// client library, in a module of its own so courier itself does not depend
// on it. Its gauges read the store through courier's internal packages,
// which change between releases: require the promcourier of the courier
// version the application requires.
//
// A Collector registers in the application's registry beside its own
// metrics. Its counters and histograms are fed by courier's event hooks
// (pass its hooks to the store, the worker and the receivers); its gauges
// are read from the store when Prometheus scrapes:
//
//	c := promcourier.New()
//	s, _ := sqlite.Open(ctx, path, store.Config{Hook: c.StoreHook})
//	c.Watch(s) // the gauges read s at each scrape
//	prometheus.MustRegister(c)
//	w, _ := client.NewWorker(client.Config{Store: s, Signer: signer, Hook: c.WorkerHook})
//	rcv, _ := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: v, Hook: c.ReceiverHook}, fn)
//	http.Handle("/metrics", promhttp.Handler())
//
// Metrics:
//
//	courier_enqueued_total                       deliveries written (counted at enqueue, before the caller's commit)
//	courier_claimed_total                        deliveries leased by workers
//	courier_settled_total{status}                deliveries settled, by an attempt or ended at a claim, by resulting status
//	courier_attempts_total{outcome,code}         attempts finished by workers; outcome lease_lost for one
//	                                             another worker's lease overtook, unrecorded (with the
//	                                             attempt's own code) for one whose outcome the store
//	                                             failed to record: it is sent again once its lease expires
//	courier_attempt_duration_seconds{outcome}    how long attempts took (none for a delivery ended before
//	                                             its attempt started)
//	courier_receiver_requests_total{outcome,code} requests answered by receivers
//	courier_endpoint_transitions_total{to}       endpoint breaker transitions, by the state entered
//	courier_outbox_deliveries{status}            deliveries in the outbox, by status (gauge)
//	courier_outbox_due                           pending or retrying deliveries due now, those of an endpoint held back aside (gauge)
//	courier_outbox_oldest_due_age_seconds        how long the oldest due delivery has waited (gauge)
//	courier_outbox_expired_leases                leases past expiry not yet reclaimed (gauge)
//	courier_outbox_overdue                       deliveries waiting past their deadline, no claim having ended them (gauge)
//	courier_endpoints{state}                     endpoints whose breaker is not closed, by state (gauge)
//	courier_endpoint_in_flight{endpoint_ref}     deliveries leased now to an endpoint, by every worker (gauge)
//	courier_endpoint_max_in_flight{endpoint_ref} an endpoint's MaxInFlight limit, for limited endpoints (gauge)
//	courier_endpoint_rate{endpoint_ref}          an endpoint's Rate limit in requests per second, for limited endpoints (gauge)
//	courier_ordering_keys_blocked                ordering keys a failed delivery holds, waiting for an operator (gauge)
//	courier_outbox_contract_mismatches           unfinished deliveries enqueued under another capabilities digest than
//	                                             their endpoint's pin, held back for an operator (gauge)
//	courier_health_blocked{code}                 1 when store.Health says an operator is needed, labelled with its code;
//	                                             0, code "", when not: the gauge to alert on (gauge)
//	courier_scrape_errors_total                  scrapes whose store reads failed (their gauges are left out)
//
// Labels carry statuses, outcomes and stable codes, never endpoint URLs,
// notification ids or any content. A code label is one of courier's own
// codes, or "other" for any other: a code a Classify, a Verifier or a
// handler.Reject made up, which may come from what the other side sent
// (a receiver's problem code, a sender's payload), counts as "other", so
// that neither side can grow the other's series; the log lines and the
// attempts log keep the code itself. The receiver's own code in a
// refusal (client.Event.RemoteCode) labels nothing. The per-endpoint
// gauges are labelled by endpoint_ref, the 32-hex reference operators'
// tools name an endpoint by (a digest of its URL, so no credential in it
// shows), and exist only for
// the endpoints store.Endpoints.List shows with deliveries in flight,
// limits, blocked keys or a breaker open or half open. Their
// number is bounded by the workers' concurrency, the endpoints an
// operator limited or must look at and those failing now (for at most
// store.BreakerConfig.DisableAfter), not by how many endpoints the
// outbox has ever sent to; and a scrape gives them to 1,000 endpoints at
// most, the first by URL: past that (a mass outage opening thousands of
// breakers at once), the others have none, and courier_endpoints and
// courier_ordering_keys_blocked still count them all. A disabled
// endpoint with none of these, as one that answered 410 Gone stays until
// an operator enables it or a prune deletes it, has no series of its own:
// courier_endpoints{state="disabled"} counts it.
package promcourier

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/opsjson"
	"github.com/courier-go/courier/internal/scrape"
	"github.com/courier-go/courier/store"
)

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 5 * time.Second

// maxEndpointSeries is how many endpoints at most a scrape gives series
// of their own (courier_endpoint_in_flight and its limits), the first by
// URL of those that have any.
const maxEndpointSeries = 1000

// otherCode is the code label of a code that is not courier's own.
const otherCode = "other"

// couriers are courier's own codes, the code label's values but for
// otherCode.
var couriers = func() map[courier.Code]bool {
	m := make(map[courier.Code]bool)
	for _, c := range []courier.Code{
		courier.CodeAckInvalid, courier.CodeLeaseExpired, courier.CodeLeaseLost, courier.CodeIdempotencyCollision,
		courier.CodeDestinationForbidden, courier.CodeIntegrity, courier.CodePayloadUnreadable, courier.CodeExpired,
		courier.CodeSubscriptionChanged, courier.CodeContractChanged, courier.CodeEndpointGone,
		courier.CodeEndpointDisabled, courier.CodeReceiverUnavailable, courier.CodeRateLimited,
		courier.CodeRequestTimeout, courier.CodeReceiverRejected, courier.CodeSignatureRejected,
		courier.CodeRedirect, courier.CodeNetwork, courier.CodeTimeout, courier.CodeSigningFailed,
		courier.CodeCancelled, courier.CodeWorkerStopped, courier.CodeMethodNotAllowed,
		courier.CodeUnsupportedMediaType, courier.CodeBodyTooLarge, courier.CodeMalformedJSON,
		courier.CodeDuplicateKey, courier.CodeValidation, courier.CodeSignatureInvalid, courier.CodeInProgress,
		courier.CodeMessageIDMissing, courier.CodeHandlerFailed, courier.CodeRejected, courier.CodeUnauthorized,
		courier.CodeForbidden, courier.CodeNotFound, courier.CodeInternal, courier.CodeServerBusy,
		courier.CodeSourceAttemptsExhausted, courier.CodePayloadInvalid, courier.CodeSchemaOutdated,
		courier.CodeSchemaAltered, courier.CodeSchemaTooNew, courier.CodeDatabaseCorrupt, courier.CodeFailedPresent,
		courier.CodeLeasesExpired, courier.CodeConfigInvalid, courier.CodeInvalidArgument,
		courier.CodeWriteOutsideTransaction, courier.CodeRequestInvalid, courier.CodeDatabaseUnavailable,
		courier.CodeDeliveriesOverdue, courier.CodeSignatureMissing, courier.CodeSignatureMalformed,
		courier.CodeSignatureTimestamp, courier.CodeSignatureMismatch, courier.CodeWebhookHeaderMalformed,
		courier.CodeWebhookParamsIncomplete, courier.CodeWebhookTagInvalid, courier.CodeWebhookAlgNotAllowed,
		courier.CodeWebhookWindowInvalid, courier.CodeWebhookComponentsIncomplete, courier.CodeWebhookKeyUnknown,
		courier.CodeWebhookKeyPurposeInvalid, courier.CodeWebhookKeyRevoked, courier.CodeWebhookRevocationStale,
		courier.CodeWebhookRateAbuse, courier.CodeWebhookInvalid, courier.CodeWebhookDigestMismatch,
		courier.CodeWebhookReplayed, courier.CodeWebhookTargetURIMalformed, courier.CodeDuplicateKeyInput,
	} {
		m[c] = true
	}
	return m
}()

// codeLabel is code as a code label: itself when courier's own (or
// none), otherCode for any other, so that no code a Classify, a Verifier
// or a handler.Reject chose, from what a receiver or a sender sent, makes
// a series of its own.
func codeLabel(code courier.Code) string {
	if code == "" || couriers[code] {
		return string(code)
	}
	return otherCode
}

// Collector is a prometheus.Collector of courier's metrics. It is safe for
// concurrent use.
type Collector struct {
	store atomic.Pointer[store.Store] // the watched store, nil for none

	enqueued  prometheus.Counter
	claimed   prometheus.Counter
	settled   *prometheus.CounterVec
	attempts  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	requests  *prometheus.CounterVec
	breakers  *prometheus.CounterVec

	deliveries, endpoints                     *prometheus.Desc
	due, oldestDueAge, expiredLeases, overdue *prometheus.Desc
	inFlight, maxInFlight, rate               *prometheus.Desc
	blockedKeys, mismatches, blocked          *prometheus.Desc
	scrapeErrors                              prometheus.Counter
}

// New returns a Collector with its counters and histograms at zero, fed
// by its hooks; its gauges are reported once Watch gives it a store.
func New() *Collector {
	return &Collector{
		enqueued: prometheus.NewCounter(prometheus.CounterOpts{Name: "courier_enqueued_total",
			Help: "Deliveries written to the outbox (counted at enqueue, before the caller's commit)."}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{Name: "courier_claimed_total",
			Help: "Deliveries leased by workers."}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_settled_total",
			Help: "Deliveries settled, by an attempt or ended at a claim, by resulting status."}, []string{"status"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_attempts_total",
			Help: "Delivery attempts finished by workers, by outcome and code."}, []string{"outcome", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "courier_attempt_duration_seconds",
			Help:    "Duration of delivery attempts, by outcome.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60}}, []string{"outcome"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_receiver_requests_total",
			Help: "Requests answered by receivers, by outcome and code."}, []string{"outcome", "code"}),
		breakers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_endpoint_transitions_total",
			Help: "Endpoint breaker transitions, by the state entered."}, []string{"to"}),
		deliveries: prometheus.NewDesc("courier_outbox_deliveries", "Deliveries in the outbox, by status.", []string{"status"}, nil),
		due:        prometheus.NewDesc("courier_outbox_due", "Pending or retrying deliveries due now, those of a disabled endpoint or one cooling down aside (store.Health's Due).", nil, nil),
		oldestDueAge: prometheus.NewDesc("courier_outbox_oldest_due_age_seconds",
			"How long the oldest due delivery has waited.", nil, nil),
		expiredLeases: prometheus.NewDesc("courier_outbox_expired_leases", "Leases past expiry, not yet reclaimed.", nil, nil),
		overdue:       prometheus.NewDesc("courier_outbox_overdue", "Deliveries waiting past their deadline, no claim having ended them.", nil, nil),
		endpoints:     prometheus.NewDesc("courier_endpoints", "Endpoints whose breaker is not closed, by state.", []string{"state"}, nil),
		inFlight: prometheus.NewDesc("courier_endpoint_in_flight",
			"Deliveries leased now to an endpoint, by every worker.", []string{"endpoint_ref"}, nil),
		maxInFlight: prometheus.NewDesc("courier_endpoint_max_in_flight",
			"An endpoint's limit on deliveries in flight, for endpoints that have one.", []string{"endpoint_ref"}, nil),
		rate: prometheus.NewDesc("courier_endpoint_rate",
			"An endpoint's rate limit in requests per second, for endpoints that have one.", []string{"endpoint_ref"}, nil),
		blockedKeys: prometheus.NewDesc("courier_ordering_keys_blocked",
			"Ordering keys a failed delivery holds, waiting for an operator to redrive or cancel it.", nil, nil),
		mismatches: prometheus.NewDesc("courier_outbox_contract_mismatches",
			"Unfinished deliveries enqueued under another capabilities digest than their endpoint's pin, held back for an operator.", nil, nil),
		blocked: prometheus.NewDesc("courier_health_blocked",
			"1 when the outbox's health needs an operator, labelled with its code (store.Health); 0 when it does not.", []string{"code"}, nil),
		scrapeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "courier_scrape_errors_total",
			Help: "Scrapes whose store reads failed; the gauges were left out."}),
	}
}

// StoreHook is a store.Config.Hook.
func (c *Collector) StoreHook(e store.Event) {
	switch e.Kind {
	case store.EventEnqueued:
		c.enqueued.Add(float64(e.N))
	case store.EventClaimed:
		c.claimed.Add(float64(e.N))
	case store.EventSettled:
		c.settled.WithLabelValues(string(e.Status)).Add(float64(e.N))
	case store.EventEndpoint:
		c.breakers.WithLabelValues(string(e.To)).Inc()
	}
}

// WorkerHook is a client.Config.Hook.
func (c *Collector) WorkerHook(e client.Event) {
	outcome, code := string(e.Outcome), codeLabel(e.Code)
	switch {
	case e.LeaseLost:
		outcome, code = "lease_lost", string(courier.CodeLeaseLost)
	case e.Unrecorded: // the attempt's own code: what the store was not told
		outcome = "unrecorded"
	}
	c.attempts.WithLabelValues(outcome, code).Inc()
	if e.Duration > 0 { // 0: ended without starting (expired in its batch), so it took no time
		c.durations.WithLabelValues(outcome).Observe(e.Duration.Seconds())
	}
}

// ReceiverHook is the Hook of a handler config.
func (c *Collector) ReceiverHook(e handler.Event) {
	c.requests.WithLabelValues(string(e.Outcome), codeLabel(e.Code)).Inc()
}

// hooked are the metrics the hooks feed.
func (c *Collector) hooked() []prometheus.Collector {
	return []prometheus.Collector{c.enqueued, c.claimed, c.settled, c.attempts, c.durations, c.requests, c.breakers}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.hooked() {
		m.Describe(ch)
	}
	c.scrapeErrors.Describe(ch)
	for _, d := range []*prometheus.Desc{c.deliveries, c.due, c.oldestDueAge, c.expiredLeases, c.overdue, c.endpoints,
		c.inFlight, c.maxInFlight, c.rate, c.blockedKeys, c.mismatches, c.blocked} {
		ch <- d
	}
}

// Watch makes the Collector report the gauges of s, read at each scrape:
// the outbox's depth by status, due deliveries and the oldest one's age,
// expired leases, and endpoints by breaker state. Without it the
// Collector reports counters and histograms only (for a process that
// only receives, say). Watching another store replaces the first: to
// watch two, give each its Collector and register each through
// prometheus.WrapRegistererWith with a label that tells them apart.
func (c *Collector) Watch(s *store.Store) { c.store.Store(s) }

// Collect implements prometheus.Collector: the counters and histograms as
// the hooks counted them, and the gauges as the store says now: the
// outbox's from one store.Outbox.Health, one snapshot of the outbox, so
// that they agree with each other (courier_outbox_due never exceeds the
// pending and retrying deliveries). The store's reads are given 5
// seconds; a scrape whose reads fail or run out reports no gauges and
// counts in courier_scrape_errors_total. The endpoints' gauges are
// counted in the database, and only the endpoints with series of their
// own are read (1,000 at most): an outbox keeping 50,000 disabled
// endpoints costs a scrape a count over them, about 10 milliseconds on
// SQLite, not a read of each.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.hooked() {
		m.Collect(ch)
	}
	if s := c.store.Load(); s != nil && c.collectStore(s, ch) != nil {
		c.scrapeErrors.Inc()
	}
	c.scrapeErrors.Collect(ch)
}

// collectStore reads the gauges from the store.
func (c *Collector) collectStore(s *store.Store, ch chan<- prometheus.Metric) error {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	h, err := s.Outbox.Health(ctx)
	if err != nil {
		return err
	}
	eps, err := scrape.For(s)(ctx, maxEndpointSeries)
	if err != nil {
		return err
	}
	for _, st := range courier.Statuses() {
		ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.GaugeValue, float64(h.Counts[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(c.due, prometheus.GaugeValue, float64(h.Due))
	ch <- prometheus.MustNewConstMetric(c.oldestDueAge, prometheus.GaugeValue, h.OldestDueAge.Seconds())
	ch <- prometheus.MustNewConstMetric(c.expiredLeases, prometheus.GaugeValue, float64(h.ExpiredLeases))
	ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, float64(h.Overdue))
	for _, st := range opsjson.NotClosed() {
		ch <- prometheus.MustNewConstMetric(c.endpoints, prometheus.GaugeValue, float64(eps.States[string(st)]), string(st))
	}
	// Disabled endpoints with nothing of their own to show are not
	// listed: they stay so until an operator enables them (or a prune deletes
	// those their breaker disabled), and pile up
	// as subscribers' endpoints go away; courier_endpoints counts them.
	for _, e := range eps.Listed {
		ref := endpoint.Ref(e.URL)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(e.InFlight), ref)
		if e.MaxInFlight > 0 {
			ch <- prometheus.MustNewConstMetric(c.maxInFlight, prometheus.GaugeValue, float64(e.MaxInFlight), ref)
		}
		if e.Rate > 0 {
			ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, e.Rate, ref)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.blockedKeys, prometheus.GaugeValue, float64(eps.BlockedKeys))
	ch <- prometheus.MustNewConstMetric(c.mismatches, prometheus.GaugeValue, float64(h.ContractMismatches))
	if h.Status == store.HealthBlocked {
		ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.GaugeValue, 1, codeLabel(h.Code))
	} else {
		ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.GaugeValue, 0, "")
	}
	return nil
}
