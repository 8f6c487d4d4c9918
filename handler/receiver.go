package handler

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/jsonbody"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/recovered"
	"github.com/courier-go/courier/internal/rules"
	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/typewalk"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// Func is the application's side of a receiver: it applies notification n
// using tx, the transaction the Inbox record is written in, so its effects
// in that database happen exactly once. An error rolls everything back: a
// Reject refuses the notification for good (422), any other error
// answers 500 handler_failed and the sender retries (503 internal_error
// with Retry-After when the database failed, not the function: tx cannot
// be rolled back, as when the server ended its connection, which a
// Reject does not outweigh, or the error is one the store reads as the
// database's, a full or read-only database, an I/O error, a lock
// conflict, from a statement through tx or from a store method, code
// database_unavailable).
//
// The function must write through tx, and leave its commit or rollback
// to the receiver (see the package doc); code of the application's that
// takes a *sql.Tx is given tx.Tx, the same transaction. It must return the error of a
// statement that failed in tx rather than go on past it: on PostgreSQL
// the failure aborts tx, which then commits nothing (the request is
// answered 503 internal_error, the sender retries). And tx is not the
// function's once it has returned: a statement through it from a
// goroutine the function started is committed with the Inbox record if
// it comes before the receiver's commit, and fails with sql.ErrTxDone
// after.
//
// tx comes from Store.Begin (on PostgreSQL at READ COMMITTED, whatever
// the database's default) and, on SQLite, holds the database's one
// writer until the receiver commits: a
// write through the Store's DB(), a second Store.Begin, or a store method
// that writes cannot proceed meanwhile. ctx is marked as holding the
// writer, so such a write given ctx fails at once, with code
// write_outside_transaction, rather than wait; the function's error
// answers 500. Reads through DB(), in a read-only transaction too, are
// fine, but do not see tx's writes. Read through tx where it can: on
// PostgreSQL, DB() and tx draw on one pool, and a read through DB() needs
// a second connection while tx holds one; with every connection held by
// requests in flight (redeliveries of one notification wait for its
// record's lock holding theirs), it waits until the request's deadline.
// Give such a pool two connections per request in flight.
//
// ctx is the request's context, with what the application's own middleware
// and router put in it (a tenant from the route, say), ended when the
// client goes away. It carries the verified sender:
// middleware.PrincipalFromContext(ctx) gives its Principal, whose
// MessageID is the signed id (webhook-id) a payload without an id of its
// own (DedupeKey "") is recorded under, for the function to keep beside
// its effects.
type Func[T any] func(ctx context.Context, tx *sqlx.Tx, n T) error

// ReceiverConfig configures a Receiver (NewReceiver).
type ReceiverConfig struct {
	// Store holds the Inbox. Required.
	Store *store.Store
	// Verifier checks each request's signature; the verified sender is the
	// dedupe namespace. Required: a receiver never accepts unsigned input.
	Verifier signature.Verifier
	// Body bounds reading a request's body: its size (413 over it), how
	// long it may take to arrive (408), and how many bytes all requests
	// may hold in buffers at once (503 over that Budget, at once, never a
	// queue). Zero fields take middleware's defaults: 1 MiB, 10 s, and a
	// Budget of 64 MiB (or of MaxBytes, if larger) of this handler's own;
	// share one Budget between handlers to bound them together.
	Body middleware.BodyLimits
	// AllowUnknownFields accepts JSON members the payload type does not
	// declare. Defaults to false: they are refused with validation_failed.
	// Members whose names differ from a declared one only in case are
	// refused either way. A payload type, or a type of its fields, that
	// decodes itself (with an UnmarshalJSON of its own, as ack.Terminal
	// does) is handed its JSON whole: the members it does not declare are
	// its method's to refuse, and this field does not reach them.
	AllowUnknownFields bool
	// Logger receives one line per refused request (Info) and per failed
	// one (Error; Info when its client went away), with its status and
	// code, never its content; a 503 in_progress (another request is
	// processing the notification) and server_busy (load shed, which slow
	// uploads from any client bring about) at Info too. Without one, the
	// handler logs through slog.Default(), its Warn and Error lines only:
	// a failed request is heard with no setup, a refused one (which a
	// sender's fault or a hostile client makes) is not. Pass
	// slog.New(slog.DiscardHandler) for none.
	Logger *slog.Logger
	// Hook receives an Event per answered request, for metrics, once the
	// answer is written, before net/http sends it (when the handler
	// returns): it must be quick, or the sender waits for it. A panic in
	// it is dropped and logged at Error: the answer stands. Defaults to
	// none.
	Hook func(Event)
}

// Receiver is an http.Handler that accepts notifications of type T exactly
// once. T is decoded from the body with encoding/json (strictly: see
// ReceiverConfig.AllowUnknownFields), validated with validator/v10 tags
// and, if it implements ack.Checker, its own Check. The Ack is T's own
// when T is an ack.Acker, courier's otherwise. It answers as the package
// documentation says.
//
// Identity: the Inbox records each notification under its verified sender
// and T's DedupeKey, with a digest that tells a redelivery from another
// notification under the same key: the SHA-256 of the exact bytes, which
// courier's own Ack binds, or T's PayloadSHA256 when T is an ack.Digester
// (ack.Terminal digests its canonical JSON, so a redelivery re-serialized
// by another encoder is a duplicate, and keys by event_id, so another
// notification for an accepted event is a collision). When the scheme
// signs a message id (Standard Webhooks' webhook-id or Svix's svix-id;
// signature.Principal.MessageID), it must be the notification id the Ack
// names, or the request is refused: a signed request cannot carry another
// notification's identity. A T that carries no id of its own (DedupeKey
// returns "") is deduped by that signed message id instead, and refused
// with 400 message_id_missing when the scheme signs none. A DedupeKey
// that is no token (see ack.Notification) is refused with 400
// validation_failed naming notification_id (rule courier_token).
//
// T may have DedupeKey (or Check, Ack, PayloadSHA256) from a struct it
// embeds by pointer: a body that does not set that struct's members
// leaves the pointer nil, and the method is called on nil as Go calls it.
// One that cannot take nil (it panics: a method of the struct's value, or
// one that dereferences its receiver) has the body refused with 400
// validation_failed naming the embedded field (rule required).
//
// Once is for as long as the notification's Inbox record is kept: prune
// the Store's Inbox with an OlderThan longer than the senders retry (a
// courier sender's store.Config.RetryHorizon, 72 hours by default, and an
// hour more) and, where failed deliveries may be redriven, longer than
// that may come; see the package documentation (Retention).
type Receiver[T ack.Notification] struct {
	cfg   ReceiverConfig
	fn    Func[T]
	front front
	h     http.Handler
	// promoted: T has DedupeKey, Ack or PayloadSHA256 through an embedded
	// pointer or interface, which a body can leave nil (see unreachable).
	promoted bool
}

// NewReceiver returns a Receiver that runs fn for each new notification.
// T must be a struct type, whose fields the body is decoded into and
// validated by: a T of any other kind (a pointer to a struct, a map, an
// interface) is refused with CodeConfigInvalid. So is a T whose validate
// tags, or those of a struct type its fields hold, name a rule the
// validator does not have (validator/v10's built-in rules and courier's
// own are all there is: see ack.Validate) or one it cannot apply to its
// field (dive on a field that is neither slice nor map), or a cross-field
// rule (required_if, eqfield, required_with, ...) naming a field its
// struct does not have (those rules name fields by their Go names, not
// their json names: validator/v10 takes any other name for a field never
// set, so the rule would never apply, or refuse every body), and a T
// with Ack or PayloadSHA256 on its pointer receiver only (T is then no
// ack.Acker or ack.Digester, and the method would go unused). So is a T that
// encoding/json cannot decode a body into as its fields declare, in T or
// in a struct type its fields hold: an embedded pointer to an unexported
// struct type with fields a body sets (encoding/json cannot allocate it:
// every body setting them would fail, or panic where a json tag names
// it), a JSON name several fields share at one depth (encoding/json
// decodes none of them), an UnmarshalJSON or UnmarshalText promoted from
// an embedded field into a struct type with fields of its own (as
// embedding a time.Time does: the method gets the whole value, the other
// fields are never set), a member no body can set (a field holding a
// channel, a function, a complex number, an interface with methods, or a
// map keyed by anything but strings, integers or text: encoding/json
// decodes only null into it; tag such a field json:"-"), a field tagged
// json:",inline" (an option encoding/json does not have: embed the struct
// instead), and a T that decodes itself from a JSON string only
// (UnmarshalText without UnmarshalJSON). Each refusal names the type and
// the field.
func NewReceiver[T ack.Notification](cfg ReceiverConfig, fn Func[T]) (*Receiver[T], error) {
	f, err := newFront("ReceiverConfig", cfg.Store, cfg.Verifier, cfg.Body, cfg.Logger, cfg.Hook)
	if err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, configError("NewReceiver: the Func is required")
	}
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		return nil, configError("NewReceiver: the notification type " + t.String() + " is a pointer: name the struct type " + t.Elem().String() +
			", declaring DedupeKey (and Ack, PayloadSHA256, where it has them) on its value receiver; the receiver decodes each body into a new " + t.Elem().String())
	}
	if t.Kind() != reflect.Struct {
		return nil, configError("NewReceiver: the notification type " + t.String() + " is not a struct (its kind is " + t.Kind().String() + "): a body is decoded into a struct's fields and validated by them")
	}
	if err := rules.Check(t); err != nil {
		return nil, configError("NewReceiver: " + err.Error())
	}
	if err := strictjson.CheckType(t); err != nil {
		return nil, configError("NewReceiver: the notification type cannot be decoded from a body: " + err.Error())
	}
	if err := pointerMethods(t); err != nil {
		return nil, err
	}
	r := &Receiver[T]{cfg: cfg, fn: fn, front: f}
	zero := reflect.New(t).Elem() // every embedded pointer nil
	for _, m := range []string{"DedupeKey", "Ack", "PayloadSHA256"} {
		if _, through := typewalk.NilEmbedded(zero, m); through {
			r.promoted = true
		}
	}
	r.h = f.handler(r.receive)
	return r, nil
}

// pointerMethods refuses a notification type t whose pointer is an
// ack.Acker or ack.Digester that t is not: the receiver holds a t, so it
// would answer with courier's own Ack, or judge redeliveries by the exact
// bytes, instead of by the method t's author declared.
func pointerMethods(t reflect.Type) error {
	for _, m := range []struct {
		iface reflect.Type
		name  string
	}{{reflect.TypeFor[ack.Acker](), "Ack"}, {reflect.TypeFor[ack.Digester](), "PayloadSHA256"}} {
		if !t.Implements(m.iface) && reflect.PointerTo(t).Implements(m.iface) {
			return configError("NewReceiver: the notification type " + t.String() + " has " + m.name +
				" on its pointer receiver only, which a receiver of " + t.String() + " does not call: declare it on the value receiver")
		}
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (rc *Receiver[T]) ServeHTTP(w http.ResponseWriter, r *http.Request) { rc.h.ServeHTTP(w, r) }

// receive runs behind signature verification.
func (rc *Receiver[T]) receive(w http.ResponseWriter, r *http.Request, body []byte, principal signature.Principal) {
	ctx := r.Context()
	var n T
	if !jsonbody.Decode(w, body, &n, rc.cfg.AllowUnknownFields) {
		return
	}
	if rc.promoted {
		if field, unset := unreachable(n, body); unset {
			answer(w, &ack.ValidationError{Fields: []ack.FieldError{{Field: field, Rule: "required"}}})
			return
		}
	}
	key, a, err := identify(n, body, principal)
	switch {
	case errors.Is(err, canonical.ErrNotFinite):
		// T's Ack or digest could not read the body (ack.Canonical's
		// number no float64 holds): the body's fault, answered as
		// Reporting answers it. identify's own refusals are no such error.
		jsonbody.NotCanonical(w, body, err)
		return
	case err != nil:
		answer(w, err)
		return
	}
	b, fresh, err := rc.process(ctx, key, n, a.Marshal())
	if err != nil {
		answer(w, err)
		return
	}
	if !fresh {
		markDuplicate(w)
	}
	writeAck(w, b)
}

// unreachable returns the embedded field of n, by its name in a body,
// that is nil and through which n has a method the receiver calls
// (DedupeKey, and Ack or PayloadSHA256 where n has them), when that
// method cannot be called on it: a body that does not set the embedded
// struct's members leaves it nil, and a method that does not take a nil
// receiver (one on the struct's value, or one that dereferences it)
// panics. Such a body is refused as one missing a required member. A
// method that takes nil for "absent" is called as Go calls it.
func unreachable(n ack.Notification, body []byte) (field string, unset bool) {
	type method struct {
		name string
		call func()
	}
	methods := []method{{"DedupeKey", func() { n.DedupeKey() }}}
	if a, ok := n.(ack.Acker); ok {
		methods = append(methods, method{"Ack", func() { _, _ = a.Ack(body) }})
	}
	if d, ok := n.(ack.Digester); ok {
		methods = append(methods, method{"PayloadSHA256", func() { _, _ = d.PayloadSHA256(body) }})
	}
	for _, m := range methods {
		if field, unset := typewalk.NilEmbedded(reflect.ValueOf(n), m.name); unset {
			if _, _, panicked := recovered.Run(m.call); panicked {
				return field, true
			}
		}
	}
	return "", false
}

// identify returns the Inbox key n, received as body from p, is recorded
// under and the Ack that answers it, or why the request is refused: no id
// to dedupe by, or a signed message id naming another notification.
func identify(n ack.Notification, body []byte, p signature.Principal) (protocol.InboxKey, ack.Ack, error) {
	id := n.DedupeKey()
	if id != "" && !wire.IsToken(id) { // no key the Inbox can hold
		return protocol.InboxKey{}, ack.Ack{}, errKeyNoToken
	}
	if id == "" { // no id of its own: the signed message id is its identity
		switch {
		case p.MessageID == "":
			return protocol.InboxKey{}, ack.Ack{}, errNoMessageID
		case !wire.IsToken(p.MessageID):
			return protocol.InboxKey{}, ack.Ack{}, &ack.ValidationError{Fields: []ack.FieldError{{Field: "webhook-id", Rule: "courier_token"}}}
		}
		id = p.MessageID
	}
	a, err := ackFor(n, id, body)
	if err != nil {
		return protocol.InboxKey{}, ack.Ack{}, err
	}
	if signsOther(p, a.NotificationID) {
		return protocol.InboxKey{}, ack.Ack{}, errSignedIdentity
	}
	digest, err := payloadDigest(n, body, a)
	if err != nil {
		return protocol.InboxKey{}, ack.Ack{}, err
	}
	return protocol.InboxKey{Sender: p.Sender, Key: id, PayloadSHA256: digest}, a, nil
}

// payloadDigest is the digest n's Inbox record keeps of body, a its Ack:
// n's own (ack.Digester), else the body's SHA-256, which the default Ack
// (ack.New, for a notification with no Ack of its own) already holds.
func payloadDigest(n ack.Notification, body []byte, a ack.Ack) (string, error) {
	switch d := n.(type) {
	case ack.Digester:
		return d.PayloadSHA256(body)
	case ack.Acker:
		return ack.Digest(body), nil
	}
	return a.NotificationSHA256, nil
}

// process records the notification and runs the application's function
// in one transaction, returning the Ack to answer and whether it was
// processed now (false: a duplicate answered from the Inbox). The Ack b is
// bound to what was received, not to what the function does, so it is
// built first and recorded with the key in one statement; a failing
// function rolls both back.
func (rc *Receiver[T]) process(ctx context.Context, key protocol.InboxKey, n T, b []byte) ([]byte, bool, error) {
	tx, err := rc.cfg.Store.Begin(ctx)
	if err != nil {
		return nil, false, fromStore(err)
	}
	defer tx.Rollback() // after Commit, a no-op
	if stored, answered, err := answeredBy(protocol.InboxFor(rc.cfg.Store).RecordCompleted(ctx, tx, key, b)); answered {
		return stored, false, err
	}
	if err := runFunc(rc.front.tracer, ctx, nil, func(ctx context.Context) error { return rc.fn(writerctx.WithHeld(ctx), tx, n) }); err != nil {
		return nil, false, fromFunc(ctx, protocol.InboxFor(rc.cfg.Store), err, tx.Rollback())
	}
	if err := commit(ctx, tx); err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// ackFor builds the Ack for n received as body.
func ackFor(n any, id string, body []byte) (ack.Ack, error) {
	if a, ok := n.(ack.Acker); ok {
		return a.Ack(body)
	}
	return ack.New(id, body), nil
}

func writeAck(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// errSignedIdentity refuses a request whose signed message id (Standard
// Webhooks signs webhook-id, or Svix's svix-id, with the body) names
// another notification than the body does: the identity a receiver
// dedupes by must be the one signed.
var errSignedIdentity = &ack.ValidationError{Fields: []ack.FieldError{{Field: "notification_id", Rule: "webhook_id"}}}

// errKeyNoToken refuses a notification whose DedupeKey is no token (see
// ack.Notification), which no Inbox record can be keyed by: the identity
// is named as the Ack would name it.
var errKeyNoToken = &ack.ValidationError{Fields: []ack.FieldError{{Field: "notification_id", Rule: "courier_token"}}}

// signsOther reports whether p's signed message id, if the scheme signs
// one, names another notification than id (errSignedIdentity).
func signsOther(p signature.Principal, id string) bool { return p.MessageID != "" && p.MessageID != id }
