package crash

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// ModeControl is the delivery control run: the sender enqueues, besides
// terminal notifications, fan-out events and commands; deliveries carry
// ordering keys; endpoints have limits (set by the parent); the breaker
// opens on the receiver's outage windows and flaky answers; payloads and
// inbox records are encrypted. The receiver counts the requests in flight
// per endpoint and per ordering key and reports on stderr, as an
// OverlapLine, every request that exceeds a limit, for the parent to
// judge (Overlap.Judge).
const ModeControl = "control"

// Lines a control receiver writes to stderr: an OverlapLine, followed by
// an Overlap as JSON, for a request that arrived while others were in
// flight beyond a limit; a PeakLine each time an endpoint's requests in
// flight reach a new high in this incarnation.
const (
	OverlapLine = "courier-crash overlap:"
	PeakLine    = "courier-crash peak:"
)

// Control endpoints, by the label the receiver records (the URL path).
const (
	LabelTerminal = "terminal"
	LabelEventsA  = "events-a"
	LabelEventsB  = "events-b"
	LabelSource   = "source"
)

// ControlLabels are the control run's endpoints.
var ControlLabels = []string{LabelTerminal, LabelEventsA, LabelEventsB, LabelSource}

// ControlLimits are the limits the parent sets on each endpoint before
// the sender starts: small enough that two workers of 8 (each with a fair
// share of 4 per endpoint) are held back by them.
var ControlLimits = map[string]store.Limits{
	LabelTerminal: {MaxInFlight: 2},
	LabelEventsA:  {MaxInFlight: 1, Rate: 400, Burst: 10},
	LabelEventsB:  {MaxInFlight: 3},
	LabelSource:   {MaxInFlight: 2, Rate: 300, Burst: 5},
}

// Tenant and EventType of the control run's fan-out.
const (
	ControlTenant    = "crash-tenant"
	ControlEventType = "crash.happened"
)

// CapabilitiesSHA256 is the source contract of the control run's commands.
var CapabilitiesSHA256 = ack.Digest([]byte("crash-source-contract"))

// controlKeys is how many ordering keys the keyed notifications spread
// over (per endpoint).
const controlKeys = 6

// Kinds of a control run's business transaction.
const (
	KindTerminal = "terminal" // a terminal notification to /terminal, with an ordering key
	KindEvent    = "event"    // a Publish fanned out to /events-a and /events-b, with an ordering key
	KindCommand  = "command"  // a command to /source (no ordering key)
)

// ControlKind returns the kind of business transaction i.
func ControlKind(i int) string {
	switch i % 4 {
	case 0, 1:
		return KindTerminal
	case 2:
		return KindEvent
	}
	return KindCommand
}

// ControlKey returns the ordering key of business transaction i.
func ControlKey(i int) string { return "key-" + strconv.Itoa((i/4)%controlKeys) }

// EndpointOf returns the URL of the control endpoint label.
func (s Spec) EndpointOf(label string) string { return "http://" + s.Addr + "/" + label }

// StoreConfig returns the store configuration of the run's processes: in
// ModeControl a breaker that opens after 3 failures, and encryption.
func (s Spec) StoreConfig() store.Config {
	if s.Mode != ModeControl {
		return StoreConfig
	}
	return ControlStoreConfig(s.Secret)
}

// PayloadKeyID names the control run's payload key: the one every
// payload and inbox record of the run is sealed under.
const PayloadKeyID = "crash-k1"

// ControlStoreConfig is the control run's store configuration, with a
// payload key derived from the run's secret.
func ControlStoreConfig(secret string) store.Config {
	cfg := StoreConfig
	cfg.Breaker.Threshold = 3
	sum := sha256.Sum256([]byte("payload-key:" + secret))
	key, err := store.NewPayloadKey(PayloadKeyID, sum[:])
	if err != nil {
		panic(err) // 32 bytes and a token: cannot fail
	}
	cfg.Encryption = &store.Encryption{Current: PayloadKeyID, Keys: []store.PayloadKey{key}}
	return cfg
}

// EventID returns the event id of business transaction i.
func EventID(seed uint64, i int) string { return fmt.Sprintf("evt-%d-%d", seed, i) }

// Event is the payload of a control run's fan-out event.
type Event struct {
	Event string `json:"event" validate:"required"`
	Key   string `json:"key" validate:"required"`
	Seq   int    `json:"seq" validate:"min=0"`
}

// DedupeKey is "": the receiver dedupes by the signed message id, the
// delivery's notification id.
func (Event) DedupeKey() string { return "" }

// Command returns the command of business transaction i: a change, or a
// tombstone for every other one (removals are claimed before changes).
func Command(seed uint64, i int) (ack.Command, []byte, error) {
	op, body := ack.OperationChange, json.RawMessage(`{"seq":`+strconv.Itoa(i)+`}`)
	if i%8 == 7 {
		op, body = ack.OperationTombstone, json.RawMessage("null")
	}
	c, err := ack.NewCommand(ack.Command{
		Operation: op, RequestID: fmt.Sprintf("crash-%d-%d", seed, i),
		SourceMaxAttempts: 20, CapabilitiesSHA256: CapabilitiesSHA256, Body: body,
	})
	if err != nil {
		return ack.Command{}, nil, err
	}
	payload, err := c.Payload()
	return c, payload, err
}

// OrderID returns the identity business transaction i records in
// crash_orders: the notification id of a terminal notification or of a
// command, the event id of an event.
func OrderID(mode string, seed uint64, i int) (string, error) {
	if mode == ModeControl {
		switch ControlKind(i) {
		case KindEvent:
			return EventID(seed, i), nil
		case KindCommand:
			c, _, err := Command(seed, i)
			return c.DedupeKey(), err
		}
	}
	n, _, err := Notification(seed, i)
	return n.NotificationID, err
}

// enqueueControl writes business transaction i's deliveries in tx.
func enqueueControl(ctx context.Context, st *store.Store, tx *sqlx.Tx, s Spec, i int) (existed bool, err error) {
	switch ControlKind(i) {
	case KindTerminal:
		n, payload, err := Notification(s.Seed, i)
		if err != nil {
			return false, err
		}
		e, err := st.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
			NotificationID: n.NotificationID, Endpoint: s.EndpointOf(LabelTerminal),
			Payload: payload, Profile: ack.ProfileTerminal, OrderingKey: ControlKey(i),
		})
		return e.Existed, err
	case KindEvent:
		payload, err := json.Marshal(Event{Event: EventID(s.Seed, i), Key: ControlKey(i), Seq: i})
		if err != nil {
			return false, err
		}
		ps, err := st.Outbox.Publish(ctx, tx, store.PublishParams{
			Tenant: ControlTenant, EventType: ControlEventType, EventID: EventID(s.Seed, i),
			Payload: payload, OrderingKey: ControlKey(i),
		})
		if err != nil {
			return false, err
		}
		if len(ps) != 2 {
			return false, fmt.Errorf("crash: publish of %d made %d deliveries, want 2", i, len(ps))
		}
		existed = true
		for _, p := range ps {
			existed = existed && p.Existed
		}
		return existed, nil
	default:
		_, payload, err := Command(s.Seed, i)
		if err != nil {
			return false, err
		}
		e, err := st.Outbox.EnqueueCommand(ctx, tx, store.CommandParams{Endpoint: s.EndpointOf(LabelSource), Payload: payload})
		return e.Existed, err
	}
}

// controlHandler is the control receiver: the four endpoints, each behind
// the in-flight watch and the flaky front.
func controlHandler(s Spec, st *store.Store, q map[string]string, verifier signature.Verifier, logger *slog.Logger, dice *dice) (http.Handler, error) {
	insert := q["insert_control_effect"]
	effect := func(ctx context.Context, tx *sqlx.Tx, id, label, key string, seq int) error {
		if _, err := tx.ExecContext(ctx, insert, id, label, key, seq, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("crash: insert effect: %w", err)
		}
		if dice.roll() {
			armSelfKill(ctx)
		}
		return nil
	}
	terminal, err := handler.NewReceiver(handler.ReceiverConfig{Store: st, Verifier: verifier, Logger: logger},
		func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
			i, err := planSeq(n.PlanID)
			if err != nil {
				return err
			}
			return effect(ctx, tx, n.NotificationID, LabelTerminal, ControlKey(i), i)
		})
	if err != nil {
		return nil, err
	}
	events := func(label string) (http.Handler, error) {
		return handler.NewReceiver(handler.ReceiverConfig{Store: st, Verifier: verifier, Logger: logger},
			func(ctx context.Context, tx *sqlx.Tx, e Event) error {
				return effect(ctx, tx, e.Event, label, e.Key, e.Seq)
			})
	}
	eventsA, err := events(LabelEventsA)
	if err != nil {
		return nil, err
	}
	eventsB, err := events(LabelEventsB)
	if err != nil {
		return nil, err
	}
	source, err := handler.NewSource(handler.SourceConfig{Store: st, Verifier: verifier, Logger: logger, CapabilitiesSHA256: CapabilitiesSHA256},
		func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
			i, err := requestSeq(c.RequestID)
			if err != nil {
				return err
			}
			return effect(ctx, tx, c.DedupeKey(), LabelSource, "", i)
		})
	if err != nil {
		return nil, err
	}
	w := newWatch(s)
	mux := http.NewServeMux()
	for label, h := range map[string]http.Handler{LabelTerminal: terminal, LabelEventsA: eventsA, LabelEventsB: eventsB, LabelSource: source} {
		mux.Handle("/"+label, w.wrap(label, killAfterCommit(h)))
	}
	return mux, nil
}

// planSeq reads i from a terminal notification's plan id, "plan-i".
func planSeq(planID string) (int, error) {
	return strconv.Atoi(strings.TrimPrefix(planID, "plan-"))
}

// requestSeq reads i from a command's request id, "crash-seed-i".
func requestSeq(requestID string) (int, error) {
	return strconv.Atoi(requestID[strings.LastIndexByte(requestID, '-')+1:])
}

// watch counts the requests in flight per endpoint and per (endpoint,
// ordering key) in this receiver. A request counts from its arrival until
// its handler returns or its client goes away (the sender's worker gave
// up on it: its lease is settled or lost, so the store no longer counts
// it either).
type watch struct {
	mu     sync.Mutex
	live   map[string]map[*entry]bool // by label: the requests in flight
	peak   map[string]int
	flaky  float64
	rng    *rand.Rand
	offset map[string]int64 // each endpoint's outage phase
}

// outagePeriod and outageLength shape each endpoint's outage windows:
// for outageLength of every outagePeriod, at a phase of its own, the
// receiver answers the endpoint's requests 503, which opens its breaker.
const (
	outagePeriod = 1500 * time.Millisecond
	outageLength = 250 * time.Millisecond
)

func newWatch(s Spec) *watch {
	w := &watch{
		live: make(map[string]map[*entry]bool), peak: make(map[string]int), flaky: s.Flaky,
		rng: rand.New(rand.NewPCG(s.Seed, 2<<32+uint64(s.Incarnation))), offset: make(map[string]int64),
	}
	for _, label := range ControlLabels {
		h := fnv.New64a()
		h.Write([]byte(label))
		w.offset[label] = int64(h.Sum64() % uint64(outagePeriod))
	}
	return w
}

// down reports whether label is in an outage window now, or this request
// drew a flaky answer.
func (w *watch) down(label string) bool {
	if w.flaky <= 0 {
		return false
	}
	if (time.Now().UnixNano()+w.offset[label])%int64(outagePeriod) < int64(outageLength) {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.Float64() < w.flaky
}

// requestKey reads the ordering key of a request's body ("" for none).
func requestKey(label string, body []byte) string {
	switch label {
	case LabelTerminal:
		var t struct {
			PlanID string `json:"plan_id"`
		}
		if json.Unmarshal(body, &t) == nil {
			if i, err := planSeq(t.PlanID); err == nil {
				return ControlKey(i)
			}
		}
	case LabelEventsA, LabelEventsB:
		var e Event
		if json.Unmarshal(body, &e) == nil {
			return e.Key
		}
	}
	return ""
}

// entry is one request in flight.
type entry struct {
	req       Request
	abandoned atomic.Int64 // unix nanos when its client went away before it was answered; 0 if not
}

// request returns e as it stands now.
func (e *entry) request() Request {
	r := e.req
	if at := e.abandoned.Load(); at != 0 {
		r.Abandoned = time.Unix(0, at)
	}
	return r
}

// Request is one request a control receiver had in flight.
type Request struct {
	ID      string    `json:"id"`      // the webhook-id: the delivery's notification id
	Attempt int       `json:"attempt"` // the attempt number it carried
	Key     string    `json:"key,omitempty"`
	Since   time.Time `json:"since"` // when its body had arrived
	// Abandoned is when its client went away before it was answered
	// (zero if it did not): the sender's worker gave up on it, its
	// attempt timed out, so it settled or lost the lease, and the store
	// no longer counted it, as MaxInFlight says.
	Abandoned time.Time `json:"abandoned,omitzero"`
}

func (r Request) String() string {
	s := fmt.Sprintf("[%s key=%s attempt=%d since=%s", r.ID, r.Key, r.Attempt, r.Since.Format("15:04:05.000000"))
	if !r.Abandoned.IsZero() {
		return s + " abandoned_at=" + r.Abandoned.Format("15:04:05.000000") + "]"
	}
	return s + " live]"
}

// Overlap is a request that arrived while others were in flight beyond
// a limit: more than its endpoint's MaxInFlight, or another of its
// ordering key. It is written once the request is answered, so Others
// say which of them had lost their client by then.
type Overlap struct {
	Endpoint string    `json:"endpoint"` // the endpoint's label
	What     string    `json:"what"`     // "same_key_in_flight", or "in_flight=n max_in_flight=m"
	Limit    int       `json:"limit"`    // how many may be in flight at once: 1 of a key, MaxInFlight of the endpoint
	Request  Request   `json:"request"`
	Others   []Request `json:"others"`
}

func (o Overlap) String() string {
	return fmt.Sprintf("endpoint=%s %s %s others=%v", o.Endpoint, o.What, o.Request, o.Others)
}

// Verdicts of Overlap.Judge.
const (
	// Breach: more requests in flight at once than the limit, sent under
	// leases that covered them; the store and the worker let it happen.
	Breach = "breach"
	// Abandoned: but for requests that had lost their client (see
	// Request.Abandoned), the limit held. A sender whose attempt ended
	// (its Timeout, its process killed) no longer counts it in flight,
	// while the receiver may still be answering it, and notices the
	// client gone only a moment later.
	Abandoned = "abandoned"
	// LeaseExpired: without the requests whose lease had expired by then
	// while the process holding it was frozen (the request itself, or
	// those it overlapped), and but for abandoned ones, the limit held.
	// A frozen process can neither give up on a request it had written
	// (live, to the receiver) nor stop one it had made ready from being
	// written when it resumes, so a lease bounds what the store counts
	// and hands out again, not what such a process sends. The receiver's
	// dedupe makes such a request a duplicate, answered without running
	// the application's function again.
	LeaseExpired = "lease_expired"
)

// Judge judges o. pastLease reports whether r, a request to o's endpoint,
// was sent on a lease that had expired by at while its holder was frozen:
// such requests do not count against the limit, nor do those that had
// lost their client. An overlap is a breach when the requests left are
// more than the limit.
func (o Overlap) Judge(pastLease func(endpoint string, r Request, at time.Time) bool) string {
	at := o.Request.Since
	if pastLease(o.Endpoint, o.Request, at) {
		return LeaseExpired
	}
	expired, abandoned := false, false
	counted := 1 // the request itself
	for _, other := range o.Others {
		switch {
		case pastLease(o.Endpoint, other, at):
			expired = true
		case !other.Abandoned.IsZero():
			abandoned = true
		default:
			counted++
		}
	}
	switch {
	case counted > o.Limit:
	case expired:
		return LeaseExpired
	case abandoned:
		return Abandoned
	}
	return Breach
}

func (w *watch) wrap(label string, next http.Handler) http.Handler {
	limit := ControlLimits[label].MaxInFlight
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, "body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		key := requestKey(label, body)
		attempt, _ := strconv.Atoi(r.Header.Get(ack.AttemptHeader))
		me := &entry{req: Request{ID: r.Header.Get("webhook-id"), Attempt: attempt, Key: key, Since: time.Now()}}

		w.mu.Lock()
		if w.live[label] == nil {
			w.live[label] = make(map[*entry]bool)
		}
		var overEndpoint, overKey []*entry
		for other := range w.live[label] {
			overEndpoint = append(overEndpoint, other)
			if key != "" && other.req.Key == key {
				overKey = append(overKey, other)
			}
		}
		w.live[label][me] = true
		n := len(w.live[label])
		if n > w.peak[label] {
			w.peak[label] = n
			fmt.Fprintf(os.Stderr, "%s endpoint=%s in_flight=%d\n", PeakLine, label, n)
		}
		w.mu.Unlock()
		if limit <= 0 || n <= limit {
			overEndpoint = nil
		}

		done := make(chan struct{})
		var once sync.Once
		leave := func() {
			once.Do(func() {
				w.mu.Lock()
				delete(w.live[label], me)
				w.mu.Unlock()
			})
		}
		go func() {
			select {
			case <-r.Context().Done(): // the client went away
				me.abandoned.Store(time.Now().UnixNano())
				leave()
			case <-done:
			}
		}()
		defer func() {
			close(done)
			leave()
			// Written once answered, when the others' clients have
			// gone or not, for the parent to judge.
			report := func(what string, limit int, others []*entry) {
				if len(others) == 0 {
					return
				}
				o := Overlap{Endpoint: label, What: what, Limit: limit, Request: me.request()}
				for _, other := range others {
					o.Others = append(o.Others, other.request())
				}
				line, err := json.Marshal(o)
				if err != nil {
					panic(err) // strings, ints and times
				}
				fmt.Fprintf(os.Stderr, "%s %s\n", OverlapLine, line)
			}
			report(fmt.Sprintf("in_flight=%d max_in_flight=%d", n, limit), limit, overEndpoint)
			report("same_key_in_flight", 1, overKey)
		}()
		if w.down(label) {
			rw.Header().Set("Retry-After", "0")
			http.Error(rw, "flaky", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(rw, r)
	})
}
