package handler_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
)

// Payload types that embed, by pointer, the struct their identity or
// their rules live in. A body without that struct's members leaves the
// pointer nil.
type (
	// OrderMeta carries the id. Its methods are on the pointer, as Go
	// code often declares them.
	OrderMeta struct {
		ID string `json:"id"`
	}
	embedsMetaPointer struct {
		*OrderMeta
		Total int `json:"total"`
	}
	// ValueMeta declares DedupeKey on the value: reached through a nil
	// *ValueMeta, Go's promotion panics before the method runs.
	ValueMeta struct {
		ID string `json:"id"`
	}
	embedsValueMetaPointer struct {
		*ValueMeta
		Total int `json:"total"`
	}
	// RuleMeta holds a rule of its own (Check) the payload is checked by.
	RuleMeta struct {
		Currency string `json:"currency"`
	}
	embedsRulePointer struct {
		ID string `json:"id"`
		*RuleMeta
	}
	// Nested: the id is two embeddings down.
	OuterMeta struct {
		*OrderMeta
	}
	embedsTwoDeep struct {
		OuterMeta
		Total int `json:"total"`
	}
)

func (m *OrderMeta) DedupeKey() string        { return m.ID }
func (m ValueMeta) DedupeKey() string         { return m.ID }
func (p embedsRulePointer) DedupeKey() string { return p.ID }
func (m *RuleMeta) Check() error {
	if m.Currency != "EUR" {
		return &ack.ValidationError{Fields: []ack.FieldError{{Field: "currency", Rule: "oneof"}}}
	}
	return nil
}

// TestReceiverRefusesBodyLeavingItsIdentityUnreachable: a payload type
// that embeds by pointer the struct declaring DedupeKey (or Check) had it
// promoted through that pointer, which a body without the struct's
// members leaves nil. The receiver called the method anyway: it panicked,
// the server dropped the connection, and the sender, seeing no answer,
// retried the same body for ever. Such a body is now refused like one
// missing a required member: 400 validation_failed naming the embedded
// field (rule required), nothing recorded, the function not run; a body
// that sets it is served as before.
func TestReceiverRefusesBodyLeavingItsIdentityUnreachable(t *testing.T) {
	keys := couriertest.StandardWebhooksKeys("s")
	serve := map[string]func() (*typedReceiver, error){
		"pointer receiver": func() (*typedReceiver, error) { return newTypedReceiver[embedsMetaPointer](t, keys, false) },
		"value receiver":   func() (*typedReceiver, error) { return newTypedReceiver[embedsValueMetaPointer](t, keys, false) },
		"check":            func() (*typedReceiver, error) { return newTypedReceiver[embedsRulePointer](t, keys, false) },
		"two deep":         func() (*typedReceiver, error) { return newTypedReceiver[embedsTwoDeep](t, keys, false) },
	}
	for _, tc := range []struct {
		name, field      string
		unset, set, want string
	}{
		{"pointer receiver", "OrderMeta", `{"total":1}`, `{"id":"a","total":1}`, "a"},
		{"value receiver", "ValueMeta", `{"total":1}`, `{"id":"a","total":1}`, "a"},
		{"check", "RuleMeta", `{"id":"a"}`, `{"id":"a","currency":"EUR"}`, "a"},
		{"two deep", "OrderMeta", `{"total":1}`, `{"id":"a","total":1}`, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := serve[tc.name]()
			if err != nil {
				t.Fatal(err)
			}
			a := tr.post(t, "a", tc.unset)
			var p struct {
				Errors []ack.FieldError `json:"errors"`
			}
			_ = json.Unmarshal([]byte(a.body), &p)
			if a.status != 400 || a.code != courier.CodeValidation || len(p.Errors) != 1 ||
				p.Errors[0] != (ack.FieldError{Field: tc.field, Rule: "required"}) {
				t.Fatalf("%s: %d %s, want 400 validation_failed naming %s (required)", tc.unset, a.status, a.body, tc.field)
			}
			if n := tr.records(t); n != 0 || tr.calls != 0 {
				t.Fatalf("refused, yet %d records and %d calls", n, tr.calls)
			}
			if a := tr.post(t, tc.want, tc.set); a.status != 200 || !strings.Contains(a.body, `"notification_id":"`+tc.want+`"`) {
				t.Fatalf("%s: %d %s, want 200", tc.set, a.status, a.body)
			}
		})
	}
}

// Payload types that embed, by pointer, an optional struct whose methods
// take a nil receiver for "absent".
type (
	// OptionalNote's Check and DedupeKey are nil-safe: no note, nothing
	// to check, no key of its own.
	OptionalNote struct {
		Text string `json:"text"`
		ID   string `json:"note_id"`
	}
	embedsOptionalNote struct {
		*OptionalNote
		Total int `json:"total"`
	}
)

func (n *OptionalNote) Check() error {
	if n == nil || n.Text != "" {
		return nil
	}
	return &ack.ValidationError{Fields: []ack.FieldError{{Field: "text", Rule: "required"}}}
}

func (n *OptionalNote) DedupeKey() string {
	if n == nil {
		return "" // the signed message id is the identity
	}
	return n.ID
}

// TestReceiverCallsNilSafeMethodsOfAnAbsentEmbeddedStruct: a method with
// a pointer receiver that takes nil for "absent", promoted through an
// embedded pointer the body left nil, is called as Go calls it: the body
// is served (its identity the signed message id), not refused as a body
// missing the struct's members, which only a method that cannot take nil
// (it panics on it) is.
func TestReceiverCallsNilSafeMethodsOfAnAbsentEmbeddedStruct(t *testing.T) {
	tr, err := newTypedReceiver[embedsOptionalNote](t, couriertest.StandardWebhooksKeys("s"), false)
	if err != nil {
		t.Fatal(err)
	}
	if a := tr.post(t, "m-1", `{"total":1}`); a.status != 200 || !strings.Contains(a.body, `"notification_id":"m-1"`) {
		t.Fatalf(`{"total":1}: %d %s, want 200 for m-1`, a.status, a.body)
	}
	if a := tr.post(t, "n-2", `{"note_id":"n-2","total":1}`); a.status != 400 || a.code != courier.CodeValidation {
		t.Fatalf("a note without text: %d %s, want 400 validation_failed", a.status, a.body)
	}
	if tr.calls != 1 {
		t.Fatalf("the function ran %d times, want once", tr.calls)
	}
}

// Payload types whose cross-field rules name a field by its json name,
// where validator/v10 looks fields up by their Go names.
type (
	requiredIfByJSONName struct {
		ID     string `json:"id"`
		Kind   string `json:"kind"`
		Refund string `json:"refund" validate:"required_if=kind refund"`
	}
	eqfieldByJSONName struct {
		ID      string `json:"id"`
		Total   int    `json:"total"`
		Charged int    `json:"charged" validate:"eqfield=total"`
	}
	requiredWithUnknown struct {
		ID    string `json:"id"`
		Note  string `json:"note"`
		Notes string `json:"notes" validate:"required_with=Note Nots"`
	}
	nestedFieldUnknown struct {
		ID    string     `json:"id"`
		Inner innerTotal `json:"inner"`
		Total int        `json:"total" validate:"ltefield=Inner.Totl"`
	}
	innerTotal struct {
		Total int `json:"total"`
	}
	// The same rules naming Go fields, promoted or nested, are served.
	crossFieldsByGoName struct {
		ID         string     `json:"id"`
		Kind       string     `json:"kind"`
		Refund     string     `json:"refund" validate:"required_if=Kind refund"`
		Inner      innerTotal `json:"inner"`
		Total      int        `json:"total" validate:"ltefield=Inner.Total"`
		embeddedID            // its field Since is promoted
		Until      int        `json:"until" validate:"omitempty,gtfield=Since"`
		Reason     string     `json:"reason" validate:"required_unless=Kind 'no refund'"`
	}
	embeddedID struct {
		Since int `json:"since"`
	}
)

func (p requiredIfByJSONName) DedupeKey() string { return p.ID }
func (p eqfieldByJSONName) DedupeKey() string    { return p.ID }
func (p requiredWithUnknown) DedupeKey() string  { return p.ID }
func (p nestedFieldUnknown) DedupeKey() string   { return p.ID }
func (p crossFieldsByGoName) DedupeKey() string  { return p.ID }

// TestReceiverRefusesRulesNamingNoField: validator/v10's cross-field
// rules (required_if, eqfield, required_with, ltefield, ...) name fields
// by their Go names, and treat a name the struct does not have as a field
// that is never set: written with the json name, as a payload's author
// reads the body, required_if=kind refund was never enforced and
// eqfield=total refused every body, so every delivery failed for good.
// NewReceiver took such a type. It is now refused with config_invalid
// naming the field and the missing name; rules naming Go fields, promoted
// and nested ones too, are served and enforced.
func TestReceiverRefusesRulesNamingNoField(t *testing.T) {
	keys := couriertest.StandardWebhooksKeys("s")
	for name, build := range map[string]func() (*typedReceiver, error){
		"required_if by json name": func() (*typedReceiver, error) { return newTypedReceiver[requiredIfByJSONName](t, keys, false) },
		"eqfield by json name":     func() (*typedReceiver, error) { return newTypedReceiver[eqfieldByJSONName](t, keys, false) },
		"required_with a typo":     func() (*typedReceiver, error) { return newTypedReceiver[requiredWithUnknown](t, keys, false) },
		"a nested name":            func() (*typedReceiver, error) { return newTypedReceiver[nestedFieldUnknown](t, keys, false) },
	} {
		_, err := build()
		if courier.CodeOf(err) != courier.CodeConfigInvalid {
			t.Errorf("%s: NewReceiver = %v, want config_invalid", name, err)
		}
	}
	tr, err := newTypedReceiver[crossFieldsByGoName](t, keys, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{`{"id":"a","kind":"refund","reason":"r"}`, 400, "refund"},
		{`{"id":"b","kind":"refund","refund":"r","reason":"r"}`, 200, ""},
		{`{"id":"c","kind":"no refund","inner":{"total":1},"total":2}`, 400, "total"},
		{`{"id":"d","kind":"no refund","since":5,"until":4}`, 400, "until"},
		{`{"id":"e","kind":"sale"}`, 400, "reason"},
		{`{"id":"f","kind":"no refund","since":5,"until":6}`, 200, ""},
	} {
		var id struct{ ID string }
		_ = json.Unmarshal([]byte(tc.body), &id)
		a := tr.post(t, id.ID, tc.body)
		if a.status != tc.status || tc.field != "" && !strings.Contains(a.body, `"field":"`+tc.field+`"`) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.body, a.status, a.body, tc.status, tc.field)
		}
	}
}

// keyedByOrder composes its dedupe key from the body's order, unchecked:
// the key may come out as no token (a space, too long, invalid UTF-8).
type keyedByOrder struct {
	Order string `json:"order" validate:"required"`
	Raw   []byte `json:"raw"`
}

func (p keyedByOrder) DedupeKey() string { return p.Order + string(p.Raw) }

// TestReceiverRefusesDedupeKeyThatIsNoToken: the Inbox keeps keys that
// are tokens (1-256 of A-Z a-z 0-9 _ . : -) only, and a DedupeKey that
// returned anything else (a space, 300 bytes, invalid UTF-8) was refused
// by the store as an invalid argument: 400 validation_failed naming no
// field at all, so neither the sender nor the application's author could
// tell what was wrong. It now names the identity, notification_id, rule
// courier_token (as a signed message id that is no token is named), and
// still records nothing and runs nothing; ack.Notification documents what
// a key must be.
func TestReceiverRefusesDedupeKeyThatIsNoToken(t *testing.T) {
	tr, err := newTypedReceiver[keyedByOrder](t, couriertest.BearerKeys("s"), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"order":"order 1"}`,
		`{"order":"` + strings.Repeat("o", 257) + `"}`,
		`{"order":"o","raw":"/w=="}`, // the key ends in byte 0xff
		`{"order":"o/1"}`,
	} {
		a := tr.post(t, "", body)
		var p struct {
			Errors []ack.FieldError `json:"errors"`
		}
		_ = json.Unmarshal([]byte(a.body), &p)
		if a.status != 400 || a.code != courier.CodeValidation || len(p.Errors) != 1 ||
			p.Errors[0] != (ack.FieldError{Field: "notification_id", Rule: "courier_token"}) {
			t.Errorf("%.40s: %d %s, want 400 validation_failed naming notification_id (courier_token)", body, a.status, a.body)
		}
	}
	if n := tr.records(t); n != 0 || tr.calls != 0 {
		t.Fatalf("refused, yet %d records and %d calls", n, tr.calls)
	}
	if a := tr.post(t, "", `{"order":"o-1"}`); a.status != 200 {
		t.Fatalf("a token key: %d %s, want 200", a.status, a.body)
	}
}

// Payload types with a member no JSON body can set: encoding/json decodes
// nothing but null into a channel, a function, a complex number, an
// interface with methods, or a map whose keys are neither strings,
// integers nor text.
type (
	chanMember struct {
		ID      string   `json:"id"`
		Updates chan int `json:"updates"`
	}
	funcMember struct {
		ID       string `json:"id"`
		Callback func()
	}
	complexMember struct {
		ID    string     `json:"id"`
		Phase complex128 `json:"phase"`
	}
	stringerMember struct {
		ID    string       `json:"id"`
		Label fmt.Stringer `json:"label"`
	}
	floatKeyedMember struct {
		ID     string             `json:"id"`
		Prices map[float64]string `json:"prices"`
	}
	nestedFuncMember struct {
		ID    string            `json:"id"`
		Lines []map[string]hook `json:"lines"`
	}
	hook struct {
		Run func() `json:"run"`
	}
	// Such fields kept out of the body are served.
	undecodableOutOfBody struct {
		ID       string      `json:"id"`
		Callback func()      `json:"-"`
		At       time.Time   `json:"at"`
		Raw      []byte      `json:"raw"`
		Counts   map[int]int `json:"counts"`
	}
)

func (p chanMember) DedupeKey() string           { return p.ID }
func (p funcMember) DedupeKey() string           { return p.ID }
func (p complexMember) DedupeKey() string        { return p.ID }
func (p stringerMember) DedupeKey() string       { return p.ID }
func (p floatKeyedMember) DedupeKey() string     { return p.ID }
func (p nestedFuncMember) DedupeKey() string     { return p.ID }
func (p undecodableOutOfBody) DedupeKey() string { return p.ID }

// TestReceiverRefusesMembersNoBodyCanSet: a payload type with a member
// encoding/json decodes nothing but null into (a channel, a function, a
// complex number, an interface with methods, a map keyed by floats) was
// served: every body that set the member was refused 400, and the type's
// author learnt of it from the senders' failed deliveries. Such a type is
// now refused by NewReceiver with config_invalid naming the field, as the
// other types encoding/json cannot decode as declared are; the same
// fields kept out of the body (json:"-") are served.
func TestReceiverRefusesMembersNoBodyCanSet(t *testing.T) {
	keys := couriertest.StandardWebhooksKeys("s")
	for name, build := range map[string]func() (*typedReceiver, error){
		"a channel":             func() (*typedReceiver, error) { return newTypedReceiver[chanMember](t, keys, false) },
		"a function":            func() (*typedReceiver, error) { return newTypedReceiver[funcMember](t, keys, false) },
		"a complex number":      func() (*typedReceiver, error) { return newTypedReceiver[complexMember](t, keys, false) },
		"a Stringer":            func() (*typedReceiver, error) { return newTypedReceiver[stringerMember](t, keys, false) },
		"a map keyed by floats": func() (*typedReceiver, error) { return newTypedReceiver[floatKeyedMember](t, keys, false) },
		"a nested function":     func() (*typedReceiver, error) { return newTypedReceiver[nestedFuncMember](t, keys, false) },
	} {
		_, err := build()
		if courier.CodeOf(err) != courier.CodeConfigInvalid {
			t.Errorf("%s: NewReceiver = %v, want config_invalid", name, err)
		}
	}
	tr, err := newTypedReceiver[undecodableOutOfBody](t, keys, false)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"a","at":"2026-01-02T03:04:05Z","raw":"YQ==","counts":{"1":2}}`
	if a := tr.post(t, "a", body); a.status != 200 {
		t.Fatalf("%s: %d %s, want 200", body, a.status, a.body)
	}
}

// embedsHidden embeds unexported types that are no structs, which
// encoding/json ignores: they are no member of the body.
type (
	auditor      interface{ Audit(string) }
	onReceive    func()
	embedsHidden struct {
		//lint:ignore U1000 the embedding is what NewReceiver reads
		auditor
		//lint:ignore U1000 the embedding is what NewReceiver reads
		onReceive
		ID string `json:"id"`
	}
)

func (p embedsHidden) DedupeKey() string { return p.ID }

// TestReceiverServesTypeEmbeddingWhatJSONIgnores: a payload type that
// embeds an unexported interface with methods or func type, which
// encoding/json ignores (it promotes the fields of embedded structs
// alone), was refused by NewReceiver as holding a member no body can set,
// though every body decodes into it.
func TestReceiverServesTypeEmbeddingWhatJSONIgnores(t *testing.T) {
	tr, err := newTypedReceiver[embedsHidden](t, couriertest.StandardWebhooksKeys("s"), false)
	if err != nil {
		t.Fatalf("NewReceiver = %v, want it to serve", err)
	}
	if a := tr.post(t, "a", `{"id":"a"}`); a.status != 200 {
		t.Fatalf("%d %s, want 200", a.status, a.body)
	}
}

// bytesMembers holds []byte members, which encoding/json takes as base64
// strings.
type (
	bytesMembers struct {
		ID    string      `json:"id"`
		Raw   []byte      `json:"raw"`
		Parts []bytesPart `json:"parts"`
	}
	bytesPart struct {
		Data []byte `json:"data"`
	}
)

func (p bytesMembers) DedupeKey() string { return p.ID }

// TestReceiverNamesBadBase64: a []byte member whose string is no base64
// was refused 400 validation_failed naming no field (encoding/json's
// error names none), where a member of the wrong type is named. It is now
// named by its path, rule type, as a wrong type is.
func TestReceiverNamesBadBase64(t *testing.T) {
	tr, err := newTypedReceiver[bytesMembers](t, couriertest.StandardWebhooksKeys("s"), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"id":"a","raw":"!!"}`, "raw"},
		{`{"id":"b","raw":"YQ==","parts":[{"data":"YQ=="},{"data":"YQ"}]}`, "parts[1].data"},
	} {
		var id struct{ ID string }
		_ = json.Unmarshal([]byte(tc.body), &id)
		a := tr.post(t, id.ID, tc.body)
		var p struct {
			Errors []ack.FieldError `json:"errors"`
		}
		_ = json.Unmarshal([]byte(a.body), &p)
		if a.status != 400 || len(p.Errors) != 1 || p.Errors[0] != (ack.FieldError{Field: tc.field, Rule: "type"}) {
			t.Errorf("%s: %d %s, want 400 naming %s (type)", tc.body, a.status, a.body, tc.field)
		}
	}
	if a := tr.post(t, "c", `{"id":"c","raw":"YQ==","parts":[{"data":""}]}`); a.status != 200 {
		t.Fatalf("valid base64: %d %s", a.status, a.body)
	}
}

// inlineMeta asks encoding/json to inline a struct, which it cannot: it
// takes the field as a member named Meta, and ignores the option.
type (
	inlineMeta struct {
		ID   string        `json:"id"`
		Meta inlinedRegion `json:",inline"`
	}
	inlinedRegion struct {
		Region string `json:"region" validate:"required"`
	}
	embeddedMeta struct {
		ID string `json:"id"`
		inlinedRegion
	}
)

func (p inlineMeta) DedupeKey() string   { return p.ID }
func (p embeddedMeta) DedupeKey() string { return p.ID }

// TestReceiverRefusesInlineOption: json:",inline" (the option of
// encoding/json/v2, YAML and others) means nothing to encoding/json,
// which decodes the field as a member named after it: a flat body's
// members were refused as unknown (400, and the sender's deliveries
// failed for good) or, with AllowUnknownFields, dropped. NewReceiver now
// refuses the option with config_invalid, naming the field; an embedded
// struct, which encoding/json does promote, is served.
func TestReceiverRefusesInlineOption(t *testing.T) {
	keys := couriertest.StandardWebhooksKeys("s")
	for _, allowUnknown := range []bool{false, true} {
		if _, err := newTypedReceiver[inlineMeta](t, keys, allowUnknown); courier.CodeOf(err) != courier.CodeConfigInvalid ||
			!strings.Contains(err.Error(), "Meta") {
			t.Errorf("AllowUnknownFields %v: NewReceiver = %v, want config_invalid naming Meta", allowUnknown, err)
		}
	}
	tr, err := newTypedReceiver[embeddedMeta](t, keys, false)
	if err != nil {
		t.Fatal(err)
	}
	if a := tr.post(t, "a", `{"id":"a","region":"eu"}`); a.status != 200 {
		t.Fatalf("embedded: %d %s, want 200", a.status, a.body)
	}
}

// keyOnPointer declares DedupeKey on its pointer receiver, as much Go code
// declares methods: only *keyOnPointer is an ack.Notification.
type keyOnPointer struct {
	ID string `json:"id"`
}

func (p *keyOnPointer) DedupeKey() string { return p.ID }

// TestReceiverOfPointerTypeSaysWhatToDeclare: a type with DedupeKey on
// its pointer receiver can be named to NewReceiver only as a pointer,
// which it refuses, as every notification type that is no struct: the
// refusal said the kind was wrong ("its kind is ptr") but not what to
// change. It still refuses it with config_invalid, and now says to
// declare DedupeKey on the value receiver and name the struct type.
func TestReceiverOfPointerTypeSaysWhatToDeclare(t *testing.T) {
	_, err := newTypedReceiver[*keyOnPointer](t, couriertest.StandardWebhooksKeys("s"), false)
	if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), "value receiver") ||
		!strings.Contains(err.Error(), "handler_test.keyOnPointer") {
		t.Fatalf("NewReceiver[*keyOnPointer] = %v, want config_invalid saying to declare DedupeKey on the value receiver of handler_test.keyOnPointer", err)
	}
}
