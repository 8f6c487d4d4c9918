package handler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// typedReceiver is a Receiver[T] on a real SQLite file behind httptest,
// with the keys its sender signs with.
type typedReceiver struct {
	store *store.Store
	url   string
	keys  couriertest.Keys
	calls int
}

func newTypedReceiver[T ack.Notification](t *testing.T, keys couriertest.Keys, allowUnknown bool) (*typedReceiver, error) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tr := &typedReceiver{store: s, keys: keys}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier, AllowUnknownFields: allowUnknown},
		func(ctx context.Context, tx *sqlx.Tx, n T) error { tr.calls++; return nil })
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	tr.url = srv.URL
	return tr, nil
}

type typedAnswer struct {
	status int
	code   courier.Code
	body   string
}

func (tr *typedReceiver) post(t *testing.T, id, body string) typedAnswer {
	t.Helper()
	resp, err := http.DefaultClient.Do(couriertest.NewRequest(tr.url, id, []byte(body), tr.keys.Signer))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := typedAnswer{status: resp.StatusCode, body: string(b)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		var p struct{ Code courier.Code }
		_ = json.Unmarshal(b, &p)
		a.code = p.Code
	}
	return a
}

func (tr *typedReceiver) records(t *testing.T) int {
	t.Helper()
	var n int
	if err := tr.store.DB().Get(&n, "SELECT count(*) FROM courier_inbox"); err != nil {
		t.Fatal(err)
	}
	return n
}

// Payload types whose validate tags validator/v10 cannot run: it panics
// validating any value of them, so no request to a Receiver of one could
// be answered.
type (
	unknownRulePayload struct {
		ID string `json:"id" validate:"required,is_cool"`
	}
	diveOnStringPayload struct {
		ID   string `json:"id"`
		Name string `json:"name" validate:"dive"`
	}
	nestedBadRulePayload struct {
		ID    string           `json:"id"`
		Items []badRuleElement `json:"items" validate:"dive"`
	}
	badRuleElement struct {
		Qty int `json:"qty" validate:"min=many"`
	}
	// validator panics on these only for a value that is set (behind
	// omitempty, a pointer, a slice), which validating the zero value
	// does not show.
	diveOnOptionalStringPayload struct {
		ID   string `json:"id"`
		Name string `json:"name" validate:"omitempty,dive"`
	}
	diveOnStringPointerPayload struct {
		ID   string  `json:"id"`
		Name *string `json:"name" validate:"dive"`
	}
	diveTooDeepPayload struct {
		ID   string   `json:"id"`
		Tags []string `json:"tags" validate:"omitempty,dive,dive"`
	}
	boundBehindOmitemptyPayload struct {
		ID  string `json:"id"`
		Qty int    `json:"qty" validate:"omitempty,min=many"`
	}
	boundOnPointerPayload struct {
		ID  string `json:"id"`
		Qty *int   `json:"qty" validate:"max=lots"`
	}
	boundOnOptionalElementPayload struct {
		ID    string        `json:"id"`
		Lines []orderedLine `json:"lines" validate:"dive"`
	}
	orderedLine struct {
		Qty int `json:"qty" validate:"omitempty,gt=some"`
	}
)

func (p unknownRulePayload) DedupeKey() string            { return p.ID }
func (p diveOnStringPayload) DedupeKey() string           { return p.ID }
func (p nestedBadRulePayload) DedupeKey() string          { return p.ID }
func (p diveOnOptionalStringPayload) DedupeKey() string   { return p.ID }
func (p diveOnStringPointerPayload) DedupeKey() string    { return p.ID }
func (p diveTooDeepPayload) DedupeKey() string            { return p.ID }
func (p boundBehindOmitemptyPayload) DedupeKey() string   { return p.ID }
func (p boundOnPointerPayload) DedupeKey() string         { return p.ID }
func (p boundOnOptionalElementPayload) DedupeKey() string { return p.ID }

// TestReceiverRefusesTypeWithUnrunnableRules: a T whose validate tags
// name a rule courier's validator does not have (a custom validator), or
// one it cannot apply (dive on a string, a bound that is no number), even
// on an element type behind a slice, or behind omitempty or a pointer
// where only a body that sets the field would reach it, is refused by
// NewReceiver with config_invalid naming the type and, where it can, the
// field, rather than served with a panic for every request (or every
// request that sets the field).
func TestReceiverRefusesTypeWithUnrunnableRules(t *testing.T) {
	keys := couriertest.StandardWebhooksKeys("s")
	for _, tc := range []struct {
		construct func() error
		names     string
	}{
		{func() error { _, err := newTypedReceiver[unknownRulePayload](t, keys, false); return err }, "unknownRulePayload"},
		{func() error { _, err := newTypedReceiver[diveOnStringPayload](t, keys, false); return err }, "diveOnStringPayload.Name"},
		{func() error { _, err := newTypedReceiver[nestedBadRulePayload](t, keys, false); return err }, "badRuleElement"},
		{func() error { _, err := newTypedReceiver[diveOnOptionalStringPayload](t, keys, false); return err }, "diveOnOptionalStringPayload.Name"},
		{func() error { _, err := newTypedReceiver[diveOnStringPointerPayload](t, keys, false); return err }, "diveOnStringPointerPayload.Name"},
		{func() error { _, err := newTypedReceiver[diveTooDeepPayload](t, keys, false); return err }, "diveTooDeepPayload.Tags"},
		{func() error { _, err := newTypedReceiver[boundBehindOmitemptyPayload](t, keys, false); return err }, "boundBehindOmitemptyPayload"},
		{func() error { _, err := newTypedReceiver[boundOnPointerPayload](t, keys, false); return err }, "boundOnPointerPayload"},
		{func() error { _, err := newTypedReceiver[boundOnOptionalElementPayload](t, keys, false); return err }, "orderedLine"},
	} {
		err := tc.construct()
		if !errors.Is(err, courier.CodeConfigInvalid) || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("NewReceiver = %v, want %s naming %s", err, courier.CodeConfigInvalid, tc.names)
		}
	}
}

// orderPayload is a payload type as applications write them: an
// embedded struct, pointer fields, raw and numeric JSON kept as sent, a
// time, a type that decodes itself, validated elements (dive), a
// conditional rule (required_if), and fields no body can set (json:"-",
// unexported).
type orderPayload struct {
	ID string `json:"id" validate:"required,courier_token"`
	orderMeta
	Note     *string           `json:"note"`
	Customer *orderCustomer    `json:"customer"`
	Extra    json.RawMessage   `json:"extra"`
	Total    json.Number       `json:"total"`
	At       time.Time         `json:"at"`
	Color    orderColor        `json:"color"`
	Items    []orderItem       `json:"items" validate:"dive"`
	Labels   map[string]string `json:"labels" validate:"dive,keys,min=2,endkeys,required"`
	Matrix   [][]int           `json:"matrix" validate:"dive,dive,min=0"`
	Status   string            `json:"status" validate:"omitempty,oneof=open cancelled"`
	Reason   string            `json:"reason" validate:"required_if=Status cancelled"`
	Secret   string            `json:"-"`
	internal string
}

type orderMeta struct {
	Region string `json:"region" validate:"omitempty,len=2"`
}

type orderCustomer struct {
	Email string `json:"email" validate:"required,email"`
}

type orderItem struct {
	SKU string `json:"sku" validate:"required"`
	Qty int    `json:"qty" validate:"min=1"`
}

// orderColor decodes itself, from one of two names.
type orderColor struct{ name string }

func (c *orderColor) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"red"`, `"blue"`:
		c.name = string(b)
		return nil
	}
	return errors.New("not a color")
}

func (p orderPayload) DedupeKey() string { return p.ID }

// Check refuses an orderPayload whose unexported field a body set: none
// may, whether unknown members are allowed or not.
func (p orderPayload) Check() error {
	if p.internal != "" {
		return errors.New("the unexported field internal was set from the body")
	}
	return nil
}

// TestReceiverOrderPayload: a Receiver of a payload type with the shapes
// applications use answers each body with its documented status and code,
// the same bytes again for a redelivery, and records only what it accepts,
// whether unknown members are allowed or not.
func TestReceiverOrderPayload(t *testing.T) {
	const full = `{"id":"o-%d","region":"eu","note":"n","customer":{"email":"a@example.com"},` +
		`"extra":{"Anything":[1,{"x":null}]},"total":12.50,"at":"2026-01-02T03:04:05Z","color":"red",` +
		`"items":[{"sku":"a","qty":1}],"labels":{"kk":"v"},"matrix":[[1,2],[]],"status":"cancelled","reason":"r"}`
	for _, allow := range []bool{false, true} {
		tr, err := newTypedReceiver[orderPayload](t, couriertest.StandardWebhooksKeys("shop"), allow)
		if err != nil {
			t.Fatal(err)
		}
		accepted := 0
		for i, tc := range []struct {
			body   string
			status int
			code   courier.Code
			field  string // the one field named, if any
		}{
			{fmt.Sprintf(full, 0), 200, "", ""},
			{`{"id":"o-%d","customer":null,"note":null}`, 200, "", ""},
			{`{"id":"o-%d","items":[{"sku":"a","qty":0}]}`, 400, courier.CodeValidation, "items[0].qty"},
			{`{"id":"o-%d","customer":{}}`, 400, courier.CodeValidation, "customer.email"},
			{`{"id":"o-%d","labels":{"k":"v"}}`, 400, courier.CodeValidation, "labels[k]"},
			{`{"id":"o-%d","labels":{"kk":""}}`, 400, courier.CodeValidation, "labels[kk]"},
			{`{"id":"o-%d","matrix":[[0],[-1]]}`, 400, courier.CodeValidation, "matrix[1][0]"},
			{`{"id":"o-%d","status":"cancelled"}`, 400, courier.CodeValidation, "reason"},
			{`{"id":"o-%d","region":"europe"}`, 400, courier.CodeValidation, "region"},
			{`{"id":"o-%d","color":"green"}`, 400, courier.CodeValidation, "color"},
			{`{"id":"o-%d","at":"yesterday"}`, 400, courier.CodeValidation, "at"},
			{`{"id":"o-%d","total":"many"}`, 400, courier.CodeValidation, "total"},
			// A value of the wrong type is named as the body names it: with
			// the index or key on the way, where a promoted field is.
			{`{"id":"o-%d","items":[{"sku":"a","qty":1},{"sku":"b","qty":"2"}]}`, 400, courier.CodeValidation, "items[1].qty"},
			{`{"id":"o-%d","items":[{"sku":"a","qty":1},{"sku":"b","qty":99999999999999999999}]}`, 400, courier.CodeValidation, "items[1].qty"},
			{`{"id":"o-%d","labels":{"kk":"v","ll":5}}`, 400, courier.CodeValidation, "labels[ll]"},
			{`{"id":"o-%d","matrix":[[1],[2,"3"]]}`, 400, courier.CodeValidation, "matrix[1][1]"},
			{`{"id":"o-%d","region":5}`, 400, courier.CodeValidation, "region"},
			{`{"id":"o-%d","items":[{"sku":"a","qty":1,"SKU":"b"}]}`, 400, courier.CodeValidation, "items[0].SKU"},
			{`{"id":"o-%d","Region":"eu"}`, 400, courier.CodeValidation, "Region"},
			{`{"id":"o-%d","extra":{"a":1,"a":2}}`, 400, courier.CodeDuplicateKey, ""},
			{`{"id":"o-%d","Secret":"s"}`, map[bool]int{false: 400, true: 200}[allow], map[bool]courier.Code{false: courier.CodeValidation}[allow], map[bool]string{false: "Secret"}[allow]},
			{`{"id":"o-%d","internal":"s"}`, map[bool]int{false: 400, true: 200}[allow], map[bool]courier.Code{false: courier.CodeValidation}[allow], map[bool]string{false: "internal"}[allow]},
			{`{"id":"o-%d","customer":{"email":"a@example.com","vip":true}}`, map[bool]int{false: 400, true: 200}[allow], map[bool]courier.Code{false: courier.CodeValidation}[allow], map[bool]string{false: "customer.vip"}[allow]},
		} {
			id := fmt.Sprintf("o-%d", i)
			body := strings.Replace(tc.body, "%d", fmt.Sprint(i), 1)
			first := tr.post(t, id, body)
			again := tr.post(t, id, body)
			if first.status != tc.status || first.code != tc.code {
				t.Errorf("allow=%v %s: %d %s (%s), want %d %s", allow, body, first.status, first.code, first.body, tc.status, tc.code)
				continue
			}
			if again != first {
				t.Errorf("allow=%v %s: redelivery answered %+v, first %+v", allow, body, again, first)
			}
			if tc.status == 200 {
				accepted++
			}
			if tc.field != "" && !strings.Contains(first.body, `"field":"`+tc.field+`"`) {
				t.Errorf("allow=%v %s: %s does not name field %s", allow, body, first.body, tc.field)
			}
			if got := tr.records(t); got != accepted || tr.calls != accepted {
				t.Errorf("allow=%v %s: %d records, %d calls; want %d", allow, body, got, tr.calls, accepted)
			}
		}
	}
}

// Payload types that declare Ack or PayloadSHA256 on the pointer
// receiver: T itself is then no ack.Acker or ack.Digester, and a Receiver
// of T would answer courier's own Ack, or judge redeliveries by the exact
// bytes, silently.
type (
	ackerOnPointer    struct{ ID string }
	digesterOnPointer struct{ ID string }
)

func (p ackerOnPointer) DedupeKey() string                 { return p.ID }
func (p *ackerOnPointer) Ack(body []byte) (ack.Ack, error) { return ack.New("own:"+p.ID, body), nil }
func (p digesterOnPointer) DedupeKey() string              { return p.ID }
func (p *digesterOnPointer) PayloadSHA256(body []byte) (string, error) {
	return ack.Digest([]byte(p.ID)), nil
}

// TestReceiverRefusesProfileMethodsOnPointer: NewReceiver refuses, with
// config_invalid, a T whose pointer has the Ack or PayloadSHA256 method
// that T lacks, rather than answer with an Ack or a digest other than the
// one the type declares.
func TestReceiverRefusesProfileMethodsOnPointer(t *testing.T) {
	keys := couriertest.StandardWebhooksKeys("s")
	if _, err := newTypedReceiver[ackerOnPointer](t, keys, false); !errors.Is(err, courier.CodeConfigInvalid) {
		t.Errorf("Ack on *T: NewReceiver = %v, want %s", err, courier.CodeConfigInvalid)
	}
	if _, err := newTypedReceiver[digesterOnPointer](t, keys, false); !errors.Is(err, courier.CodeConfigInvalid) {
		t.Errorf("PayloadSHA256 on *T: NewReceiver = %v, want %s", err, courier.CodeConfigInvalid)
	}
}

// diveIntoAnyPayload dives into a field of interface type, which
// NewReceiver accepts: what the field holds decides whether the dive
// applies, a list or an object, or not.
type diveIntoAnyPayload struct {
	ID   string `json:"id" validate:"required,courier_token"`
	Tags any    `json:"tags" validate:"omitempty,dive,required"`
}

func (p diveIntoAnyPayload) DedupeKey() string { return p.ID }

// TestReceiverDiveIntoAnInterfaceNeverPanics: a body whose member, under
// a field of interface type its rules dive into, is neither list nor
// object made the validator panic inside the receiver: net/http dropped
// the connection, and the sender got no answer at all. It is refused now
// with 400 validation_failed, and a list or an object is accepted as
// before.
func TestReceiverDiveIntoAnInterfaceNeverPanics(t *testing.T) {
	t.Parallel()
	tr, err := newTypedReceiver[diveIntoAnyPayload](t, couriertest.StandardWebhooksKeys("shop"), false)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		body   string
		status int
		code   courier.Code
	}{
		{`{"id":"t-%d","tags":["a"]}`, 200, ""},
		{`{"id":"t-%d","tags":{"k":"v"}}`, 200, ""},
		{`{"id":"t-%d","tags":"a"}`, 400, courier.CodeValidation},
		{`{"id":"t-%d","tags":5}`, 400, courier.CodeValidation},
	} {
		id := fmt.Sprintf("t-%d", i)
		body := strings.Replace(tc.body, "%d", fmt.Sprint(i), 1)
		if a := tr.post(t, id, body); a.status != tc.status || a.code != tc.code {
			t.Errorf("%s: %d %s (%s), want %d %s", body, a.status, a.code, a.body, tc.status, tc.code)
		}
	}
	if got := tr.records(t); got != 2 || tr.calls != 2 {
		t.Fatalf("%d records, %d calls; want the 2 accepted", got, tr.calls)
	}
}

// diveIntoAnyLines holds, in the elements of a list, fields of interface
// type their rules dive into, without omitempty.
type diveIntoAnyLines struct {
	ID    string        `json:"id" validate:"required,courier_token"`
	Tags  any           `json:"tags" validate:"dive,required"`
	Lines []diveAnyLine `json:"lines" validate:"dive"`
}

type diveAnyLine struct {
	Tags any `json:"tags" validate:"dive,required"`
}

func (p diveIntoAnyLines) DedupeKey() string { return p.ID }

// TestReceiverDiveIntoAnInterfaceNamesTheField: a member under a field of
// interface type its rules dive into that is neither list nor object was
// refused 400 validation_failed naming no field, where the same member
// null, which the dive cannot go into either, names it (rule dive), as
// every other validation failure does. Each is named now, at any depth.
func TestReceiverDiveIntoAnInterfaceNamesTheField(t *testing.T) {
	t.Parallel()
	tr, err := newTypedReceiver[diveIntoAnyLines](t, couriertest.StandardWebhooksKeys("shop"), false)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		body   string
		fields []ack.FieldError
	}{
		{`{"id":"t-%d","tags":null,"lines":[]}`, []ack.FieldError{{Field: "tags", Rule: "dive"}}},
		{`{"id":"t-%d","tags":"a","lines":[]}`, []ack.FieldError{{Field: "tags", Rule: "dive"}}},
		{`{"id":"t-%d","tags":5,"lines":[]}`, []ack.FieldError{{Field: "tags", Rule: "dive"}}},
		{`{"id":"t-%d","tags":["a"],"lines":[{"tags":["b"]},{"tags":true}]}`, []ack.FieldError{{Field: "lines[1].tags", Rule: "dive"}}},
		{`{"id":"t-%d","tags":[["a"]],"lines":[]}`, nil},
	} {
		id := fmt.Sprintf("t-%d", i)
		body := strings.Replace(tc.body, "%d", fmt.Sprint(i), 1)
		a := tr.post(t, id, body)
		var p struct {
			Code   courier.Code     `json:"code"`
			Errors []ack.FieldError `json:"errors"`
		}
		if tc.fields == nil {
			if a.status != http.StatusOK {
				t.Errorf("%s: %d %s, want 200", body, a.status, a.body)
			}
			continue
		}
		if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.status != http.StatusBadRequest || p.Code != courier.CodeValidation ||
			fmt.Sprint(p.Errors) != fmt.Sprint(tc.fields) {
			t.Errorf("%s: %d %s, want 400 validation_failed naming %v", body, a.status, a.body, tc.fields)
		}
	}
	if got := tr.records(t); got != 1 || tr.calls != 1 {
		t.Fatalf("%d records, %d calls; want the 1 accepted", got, tr.calls)
	}
}

// Payload types encoding/json cannot decode a body into as their fields
// declare: a Receiver of one fails every request that carries some of its
// fields, or drops them silently.
type (
	// encoding/json cannot allocate an embedded pointer to an unexported
	// struct type: a body setting its promoted region fails to decode,
	// 400 naming no field.
	embedsUnexportedPointer struct {
		ID string `json:"id"`
		*regionMeta
	}
	regionMeta struct {
		Region string `json:"region"`
	}
	// Given a JSON name, it is a member of its own, and decoding into it
	// panics (reflect: Set using value obtained using unexported field):
	// the connection is dropped with no answer.
	namesUnexportedPointer struct {
		ID          string `json:"id"`
		*regionMeta `json:"meta"`
	}
	// The same, in the element type of a slice.
	linesWithUnexportedPointer struct {
		ID    string            `json:"id"`
		Lines []lineWithPointer `json:"lines"`
	}
	lineWithPointer struct {
		SKU string `json:"sku"`
		*regionMeta
	}
	// Two fields with one JSON name at one depth (vet's structtag check
	// sees only tagged ones): encoding/json decodes neither, so a body's
	// Address is unknown (or dropped, when unknown members are allowed)
	// and required fails every request.
	twoEmbeddedNames struct {
		ID string `json:"id"`
		billing
		shipping
	}
	billing struct {
		Address string `validate:"required"`
	}
	shipping struct{ Address string }
	// Embedding time.Time promotes its UnmarshalJSON: encoding/json hands
	// the whole body to it, so a JSON object never decodes and id is never
	// set.
	embedsTime struct {
		ID string `json:"id"`
		time.Time
	}
	// netip.Addr's UnmarshalText, promoted, makes the struct decode from a
	// JSON string only: a customer object never decodes.
	customerWithAddr struct {
		ID       string            `json:"id"`
		Customer addressedCustomer `json:"customer"`
	}
	addressedCustomer struct {
		Name string `json:"name"`
		netip.Addr
	}
	// A type that decodes itself from text only: encoding/json refuses any
	// JSON object for it.
	textOnlyPayload struct{ ID string }
)

func (p *textOnlyPayload) UnmarshalText(b []byte) error { p.ID = string(b); return nil }

func (p embedsUnexportedPointer) DedupeKey() string    { return p.ID }
func (p namesUnexportedPointer) DedupeKey() string     { return p.ID }
func (p linesWithUnexportedPointer) DedupeKey() string { return p.ID }
func (p twoEmbeddedNames) DedupeKey() string           { return p.ID }
func (p embedsTime) DedupeKey() string                 { return p.ID }
func (p customerWithAddr) DedupeKey() string           { return p.ID }
func (p textOnlyPayload) DedupeKey() string            { return p.ID }

// TestReceiverRefusesTypesJSONCannotDecode: NewReceiver accepted payload
// types encoding/json cannot decode a body into as declared, and served
// them: every body carrying an embedded unexported pointer's field was
// refused 400 naming no field, or dropped the connection; a JSON name
// two fields share was refused as unknown, or dropped, and its required
// rule failed every request; a promoted UnmarshalJSON or UnmarshalText
// refused every object, as did a type that decodes itself from text
// only. Each is refused now when built, with
// config_invalid naming the type and the field.
func TestReceiverRefusesTypesJSONCannotDecode(t *testing.T) {
	keys := couriertest.StandardWebhooksKeys("s")
	for _, tc := range []struct {
		construct func() error
		names     []string
	}{
		{func() error { _, err := newTypedReceiver[embedsUnexportedPointer](t, keys, false); return err },
			[]string{"embedsUnexportedPointer.regionMeta"}},
		{func() error { _, err := newTypedReceiver[namesUnexportedPointer](t, keys, false); return err },
			[]string{"namesUnexportedPointer.regionMeta"}},
		{func() error { _, err := newTypedReceiver[linesWithUnexportedPointer](t, keys, false); return err },
			[]string{"lineWithPointer.regionMeta"}},
		{func() error { _, err := newTypedReceiver[twoEmbeddedNames](t, keys, true); return err },
			[]string{"twoEmbeddedNames", "billing.Address", "shipping.Address", `"Address"`}},
		{func() error { _, err := newTypedReceiver[twoEmbeddedNames](t, keys, false); return err },
			[]string{"billing.Address", "shipping.Address", `"Address"`}},
		{func() error { _, err := newTypedReceiver[embedsTime](t, keys, false); return err },
			[]string{"embedsTime.Time", "UnmarshalJSON"}},
		{func() error { _, err := newTypedReceiver[customerWithAddr](t, keys, false); return err },
			[]string{"addressedCustomer.Addr", "UnmarshalText"}},
		{func() error { _, err := newTypedReceiver[textOnlyPayload](t, keys, false); return err },
			[]string{"textOnlyPayload", "UnmarshalText"}},
	} {
		err := tc.construct()
		if !errors.Is(err, courier.CodeConfigInvalid) {
			t.Errorf("NewReceiver = %v, want %s naming %s", err, courier.CodeConfigInvalid, tc.names)
			continue
		}
		for _, name := range tc.names {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("NewReceiver = %v, want it to name %s", err, name)
			}
		}
	}
}

// Payload types that look like those refused above but decode as
// declared.
type (
	// A field of the struct itself shadows an embedded one's of the same
	// JSON name, and a tagged field an untagged one at its depth.
	shadowedNames struct {
		ID     string `json:"id"`
		Region string `json:"region" validate:"required"`
		regionMeta
		tagged
		untagged
	}
	tagged struct {
		Code string `json:"Code"`
	}
	untagged struct{ Code int }
	// A type that only wraps another, embedding it for its methods, decodes
	// as that one does; an embedded pointer to an exported struct is
	// allocated by encoding/json.
	wrappersPayload struct {
		ID   string    `json:"id"`
		At   stampedAt `json:"at" validate:"required"`
		From netAddr   `json:"from"`
		*Audit
	}
	stampedAt struct{ time.Time }
	netAddr   struct{ netip.Addr }
	// Audit is exported, so encoding/json can allocate it.
	Audit struct {
		By string `json:"by" validate:"required"`
	}
	// A type that declares its own UnmarshalJSON over an embedded one's
	// decodes as it says.
	ownDecoder struct {
		ID string `json:"id"`
		time.Time
	}
)

func (p *ownDecoder) UnmarshalJSON(b []byte) error {
	var v struct {
		ID string    `json:"id"`
		At time.Time `json:"at"`
	}
	err := json.Unmarshal(b, &v)
	p.ID, p.Time = v.ID, v.At
	return err
}

func (p shadowedNames) DedupeKey() string   { return p.ID }
func (p wrappersPayload) DedupeKey() string { return p.ID }
func (p ownDecoder) DedupeKey() string      { return p.ID }

// TestReceiverServesTypesJSONDecodes: the refusals above do not reach
// types encoding/json decodes as declared: a shadowed name, a type that
// wraps a time or an address, an embedded pointer to an exported struct,
// an UnmarshalJSON the type declares itself.
func TestReceiverServesTypesJSONDecodes(t *testing.T) {
	keys := couriertest.StandardWebhooksKeys("s")
	tr1, err := newTypedReceiver[shadowedNames](t, keys, false)
	if err != nil {
		t.Fatal(err)
	}
	tr2, err := newTypedReceiver[wrappersPayload](t, keys, false)
	if err != nil {
		t.Fatal(err)
	}
	tr3, err := newTypedReceiver[ownDecoder](t, keys, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tr     *typedReceiver
		body   string
		status int
	}{
		{tr1, `{"id":"a","region":"eu","Code":"c"}`, 200},
		{tr1, `{"id":"b","Code":"c"}`, 400},
		{tr2, `{"id":"c","at":"2026-01-02T03:04:05Z","from":"192.0.2.1","by":"ops"}`, 200},
		{tr2, `{"id":"d","at":"2026-01-02T03:04:05Z","by":""}`, 400},
		{tr3, `{"id":"e","at":"2026-01-02T03:04:05Z"}`, 200},
	} {
		var id struct{ ID string }
		_ = json.Unmarshal([]byte(tc.body), &id)
		if a := tc.tr.post(t, id.ID, tc.body); a.status != tc.status {
			t.Errorf("%s: %d %s (%s), want %d", tc.body, a.status, a.code, a.body, tc.status)
		}
	}
}

// ownAcker answers an Ack of its own whose notification_sha256 is no
// digest of the body, and judges redeliveries by nothing of its own (no
// PayloadSHA256).
type ownAcker struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

func (p ownAcker) DedupeKey() string { return p.ID }
func (p ownAcker) Ack(body []byte) (ack.Ack, error) {
	a := ack.New(p.ID, body)
	a.NotificationSHA256 = ack.Digest([]byte(p.ID))
	return a, nil
}

// plainNote has neither Ack nor PayloadSHA256: courier's own Ack.
type plainNote struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

func (p plainNote) DedupeKey() string { return p.ID }

// TestReceiverRecordsTheBodysDigest: the Inbox keeps the SHA-256 of the
// exact body for a notification without PayloadSHA256, whether it answers
// courier's own Ack (whose notification_sha256 is that digest) or one of
// its own (whose notification_sha256 may be anything): the same id with
// another body is a collision, the same body a duplicate.
func TestReceiverRecordsTheBodysDigest(t *testing.T) {
	keys := couriertest.StandardWebhooksKeys("s")
	for name, open := range map[string]func(*testing.T) (*typedReceiver, error){
		"own Ack":     func(t *testing.T) (*typedReceiver, error) { return newTypedReceiver[ownAcker](t, keys, false) },
		"courier Ack": func(t *testing.T) (*typedReceiver, error) { return newTypedReceiver[plainNote](t, keys, false) },
	} {
		t.Run(name, func(t *testing.T) {
			tr, err := open(t)
			if err != nil {
				t.Fatal(err)
			}
			body := `{"id":"a","n":1}`
			first := tr.post(t, "a", body)
			if first.status != 200 {
				t.Fatalf("first: %d %s, want 200", first.status, first.body)
			}
			var stored string
			if err := tr.store.DB().Get(&stored, "SELECT payload_sha256 FROM courier_inbox WHERE dedupe_key = 'a'"); err != nil {
				t.Fatal(err)
			}
			if want := ack.Digest([]byte(body)); stored != want {
				t.Errorf("recorded digest %s, want the body's %s", stored, want)
			}
			if a := tr.post(t, "a", body); a.status != 200 || a.body != first.body {
				t.Errorf("same body again: %d %s, want the first Ack %s", a.status, a.body, first.body)
			}
			if a := tr.post(t, "a", `{"id":"a","n":2}`); a.status != 409 || a.code != courier.CodeIdempotencyCollision {
				t.Errorf("another body: %d %s, want 409 %s", a.status, a.body, courier.CodeIdempotencyCollision)
			}
			if tr.calls != 1 {
				t.Errorf("%d calls, want 1", tr.calls)
			}
		})
	}
}
