package prometheus

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
)

// durationBuckets are the upper bounds, in seconds, of the attempt
// duration histogram.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// Metrics counts courier's events and serves them. It is safe for
// concurrent use.
type Metrics struct {
	mu        sync.Mutex
	counters  map[string]map[string]float64 // metric -> label set -> value
	durations map[string]*histogram         // result -> histogram
}

type histogram struct {
	buckets []uint64 // cumulative counts are computed when written
	count   uint64
	sum     float64
}

// New returns empty Metrics.
func New() *Metrics {
	return &Metrics{counters: map[string]map[string]float64{}, durations: map[string]*histogram{}}
}

// metric help texts, by name.
var help = map[string]string{
	"courier_enqueued_total":           "Deliveries written to the outbox (counted at enqueue, before the caller's commit).",
	"courier_claimed_total":            "Deliveries leased by workers.",
	"courier_settled_total":            "Attempts settled, by the delivery's resulting status.",
	"courier_attempts_total":           "Delivery attempts finished by workers, by result and code.",
	"courier_attempt_duration_seconds": "Duration of delivery attempts, by result.",
	"courier_receiver_requests_total":  "Requests answered by receivers, by outcome and code.",
}

func (m *Metrics) add(metric, labels string, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counters[metric] == nil {
		m.counters[metric] = map[string]float64{}
	}
	m.counters[metric][labels] += v
}

// StoreHook is a store.Config.Hook.
func (m *Metrics) StoreHook(e store.Event) {
	switch e.Kind {
	case store.EventEnqueued:
		m.add("courier_enqueued_total", "", float64(e.N))
	case store.EventClaimed:
		m.add("courier_claimed_total", "", float64(e.N))
	case store.EventSettled:
		m.add("courier_settled_total", labels("status", string(e.Status)), float64(e.N))
	}
}

// WorkerHook is a client.Config.Hook.
func (m *Metrics) WorkerHook(e client.Event) {
	if e.LeaseLost {
		m.add("courier_attempts_total", labels("result", "lease_lost", "code", "lease_lost"), 1)
		return
	}
	result := string(e.Outcome)
	m.add("courier_attempts_total", labels("result", result, "code", string(e.Code)), 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.durations[result]
	if h == nil {
		h = &histogram{buckets: make([]uint64, len(durationBuckets))}
		m.durations[result] = h
	}
	s := e.Duration.Seconds()
	for i, le := range durationBuckets {
		if s <= le {
			h.buckets[i]++
			break
		}
	}
	h.count++
	h.sum += s
}

// ReceiverHook is the Hook of any handler config (handler.ReceiverConfig,
// ReportingConfig, SourceConfig, PublishConfig).
func (m *Metrics) ReceiverHook(e handler.Event) {
	m.add("courier_receiver_requests_total", labels("outcome", e.Outcome, "code", string(e.Code)), 1)
}

// labels renders a label set: name="value" pairs in the given order.
func labels(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pairs[i])
		b.WriteString(`="`)
		b.WriteString(escape(pairs[i+1]))
		b.WriteByte('"')
	}
	return b.String()
}

func escape(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// ServeHTTP writes the metrics in the text exposition format.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m.WriteTo(w)
}

// WriteTo writes the metrics in the text exposition format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(m.counters)) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, help[name], name)
		series := m.counters[name]
		for _, ls := range slices.Sorted(maps.Keys(series)) {
			if ls == "" {
				fmt.Fprintf(&b, "%s %s\n", name, number(series[ls]))
			} else {
				fmt.Fprintf(&b, "%s{%s} %s\n", name, ls, number(series[ls]))
			}
		}
	}
	if len(m.durations) > 0 {
		const name = "courier_attempt_duration_seconds"
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s histogram\n", name, help[name], name)
		for _, result := range slices.Sorted(maps.Keys(m.durations)) {
			h := m.durations[result]
			var cum uint64
			for i, le := range durationBuckets {
				cum += h.buckets[i]
				fmt.Fprintf(&b, "%s_bucket{result=\"%s\",le=\"%s\"} %d\n", name, escape(result), number(le), cum)
			}
			fmt.Fprintf(&b, "%s_bucket{result=\"%s\",le=\"+Inf\"} %d\n", name, escape(result), h.count)
			fmt.Fprintf(&b, "%s_sum{result=\"%s\"} %s\n", name, escape(result), number(h.sum))
			fmt.Fprintf(&b, "%s_count{result=\"%s\"} %d\n", name, escape(result), h.count)
		}
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

func number(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
