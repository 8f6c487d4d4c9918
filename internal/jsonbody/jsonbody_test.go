package jsonbody_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/fieldlist"
	"github.com/courier-go/courier/internal/jsonbody"
)

func TestIsJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		contentType string
		want        bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"application/json; charset=UTF-8", true},
		{"application/json; charset=Utf-8", true},
		{`application/json; charset="uTF-8"`, true},
		{"APPLICATION/JSON", true},
		{"application/json; charset=utf-16", false},
		{"application/json; charset=iso-8859-1", false},
		{"application/json; charset=", false},
		{"application/problem+json", false},
		{"text/json", false},
		{"", false},
	} {
		if got := jsonbody.IsJSON(tc.contentType); got != tc.want {
			t.Errorf("IsJSON(%q) = %v, want %v", tc.contentType, got, tc.want)
		}
	}
}

// TestIsJSONRequest: a request is JSON when Content-Type comes on exactly
// one field line that IsJSON accepts; two lines, whatever they say, are a
// list of types, not JSON.
func TestIsJSONRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lines []string
		want  bool
	}{
		{[]string{"application/json"}, true},
		{[]string{"application/json; charset=UTF-8"}, true},
		{nil, false},
		{[]string{""}, false},
		{[]string{"text/plain"}, false},
		{[]string{"application/json", "text/plain"}, false},
		{[]string{"text/plain", "application/json"}, false},
		{[]string{"application/json", "application/json"}, false},
		{[]string{"application/json", ""}, false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		if tc.lines != nil {
			r.Header["Content-Type"] = tc.lines
		}
		if got := jsonbody.IsJSONRequest(r); got != tc.want {
			t.Errorf("IsJSONRequest(Content-Type %q) = %v, want %v", tc.lines, got, tc.want)
		}
	}
}

// TestHasContentCoding: a body is coded when Content-Encoding names any
// coding but identity, on any of its lines, in any case; identity, an
// empty field or none at all is the body as it is.
func TestHasContentCoding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lines []string
		want  bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"identity"}, false},
		{[]string{"Identity"}, false},
		{[]string{"identity, identity"}, false},
		{[]string{"gzip"}, true},
		{[]string{"GZIP"}, true},
		{[]string{"br"}, true},
		{[]string{"identity, gzip"}, true},
		{[]string{"identity", "deflate"}, true},
		{[]string{" , gzip"}, true},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		if tc.lines != nil {
			r.Header["Content-Encoding"] = tc.lines
		}
		if got := jsonbody.HasContentCoding(r); got != tc.want {
			t.Errorf("HasContentCoding(Content-Encoding %q) = %v, want %v", tc.lines, got, tc.want)
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	type request struct {
		Name string `json:"name" validate:"required"`
	}
	for _, tc := range []struct {
		body         string
		allowUnknown bool
		code         courier.Code // "" accepted
		field        string
	}{
		{`{"name":"a"}`, false, "", ""},
		{`{"name":"a","x":1}`, true, "", ""},
		{`{"name":"a","x":1}`, false, courier.CodeValidation, "x"},
		{`{"NAME":"a"}`, true, courier.CodeValidation, "NAME"},
		{`{"name":""}`, false, courier.CodeValidation, "name"},
		{`{"name":1}`, false, courier.CodeValidation, "name"},
		{`{"name":"a","name":"b"}`, false, courier.CodeDuplicateKey, ""},
		{`{"name":`, false, courier.CodeMalformedJSON, ""},
	} {
		rec := httptest.NewRecorder()
		var v request
		ok := jsonbody.Decode(rec, []byte(tc.body), &v, tc.allowUnknown)
		if tc.code == "" {
			if !ok || v.Name != "a" || rec.Body.Len() != 0 {
				t.Errorf("%s: refused (%s)", tc.body, rec.Body)
			}
			continue
		}
		var p struct {
			Code   courier.Code `json:"code"`
			Errors []struct{ Field string }
		}
		if ok || rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Code != tc.code {
			t.Errorf("%s: %v %d %s, want 400 %s", tc.body, ok, rec.Code, rec.Body, tc.code)
			continue
		}
		if tc.field != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tc.field) {
			t.Errorf("%s: errors %+v, want field %s", tc.body, p.Errors, tc.field)
		}
	}
}

// TestDecodeRefusesCaseVariantsAtAnyDepth: a member whose name differs
// from a field's only in case was refused only at the top level and only
// for a field with a json tag name, though encoding/json takes it for the
// field at any depth and matches an untagged field by its Go name in any
// case. So {"id":"a"} filled an untagged ID, {"order":{"ID":"b"}} the
// nested order's id, unchecked by the name that validation and the
// application read. Such members are now refused wherever they are,
// 400 validation_failed naming them by path, as at the top level; exact
// names, and names encoding/json gives to no field, are not.
func TestDecodeRefusesCaseVariantsAtAnyDepth(t *testing.T) {
	t.Parallel()
	type untagged struct {
		ID     string
		Amount int `json:",omitempty"`
	}
	type item struct {
		SKU string `json:"sku"`
	}
	type Base struct {
		Tenant string `json:"tenant"`
	}
	type order struct {
		Base                              // promoted: tenant
		ID       string                   `json:"id"`
		Secret   string                   `json:"-"`
		Items    []item                   `json:"items"`
		Pair     [1]item                  `json:"pair"`
		ByKey    map[string]item          `json:"by_key"`
		Ref      *item                    `json:"ref"`
		Nested   [][]*item                `json:"nested"`
		Extra    json.RawMessage          `json:"extra"`
		Loose    map[string]any           `json:"loose"`
		Children map[string][]untagged    `json:"children"`
		Named    struct{ Inner untagged } `json:"named"`
	}
	type request struct {
		Order order `json:"order"`
	}
	type site struct {
		Tenant string
		Region string
	}
	type account struct {
		Tenant string
		Region string `json:"region"`
	}
	// Tenant is ambiguous at one depth, so encoding/json fills neither.
	type ambiguous struct {
		site
		account
	}
	for _, tc := range []struct {
		name  string
		body  string
		v     any
		field string // "": accepted
	}{
		{"untagged field, its Go name", `{"ID":"a","Amount":1}`, &untagged{}, ""},
		{"untagged field, lower case", `{"id":"a"}`, &untagged{}, "id"},
		{"untagged field, both spellings", `{"ID":"a","id":"b"}`, &untagged{}, "id"},
		{"tag without a name, lower case", `{"ID":"a","amount":1}`, &untagged{}, "amount"},
		{"nested object", `{"order":{"id":"a","ID":"b"}}`, &request{}, "order.ID"},
		{"case variant of the parent", `{"ORDER":{"id":"a"}}`, &request{}, "ORDER"},
		{"slice element", `{"order":{"items":[{"sku":"a"},{"SKU":"b"}]}}`, &request{}, "order.items[1].SKU"},
		{"array element", `{"order":{"pair":[{"Sku":"a"}]}}`, &request{}, "order.pair[0].Sku"},
		{"map value", `{"order":{"by_key":{"k":{"sKu":"a"}}}}`, &request{}, "order.by_key[k].sKu"},
		{"pointer", `{"order":{"ref":{"SKU":"a"}}}`, &request{}, "order.ref.SKU"},
		{"slices of pointers", `{"order":{"nested":[[null,{"SKU":"a"}]]}}`, &request{}, "order.nested[0][1].SKU"},
		{"map of slices of untagged", `{"order":{"children":{"c":[{"Id":"a"}]}}}`, &request{}, "order.children[c][0].Id"},
		{"untagged nested field", `{"order":{"named":{"inner":{"ID":"a"}}}}`, &request{}, "order.named.inner"},
		{"untagged nested field's field", `{"order":{"named":{"Inner":{"iD":"a"}}}}`, &request{}, "order.named.Inner.iD"},
		{"promoted field", `{"order":{"TENANT":"t"}}`, &request{}, "order.TENANT"},
		{"embedded struct's own name", `{"order":{"base":{"tenant":"t"}}}`, &request{}, ""},
		{"a field tagged -", `{"order":{"secret":"s","Secret":"s"}}`, &request{}, ""},
		{"inside a raw member", `{"order":{"extra":{"ID":1},"loose":{"ID":1}}}`, &request{}, ""},
		{"unexported embedded struct's field", `{"Region":"r","REGION":"s"}`, &ambiguous{}, "REGION"},
		{"name no field has", `{"TENANT":"t"}`, &ambiguous{}, ""},
		{"exact names throughout", `{"order":{"tenant":"t","id":"a","items":[{"sku":"a"}],"pair":[{"sku":"b"}],"by_key":{"k":{"sku":"c"}},` +
			`"ref":{"sku":"d"},"nested":[[{"sku":"e"}]],"children":{"c":[{"ID":"f"}]},"named":{"Inner":{"ID":"g"}}}}`, &request{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			ok := jsonbody.Decode(rec, []byte(tc.body), tc.v, true)
			if tc.field == "" {
				if !ok {
					t.Fatalf("%s: refused: %s", tc.body, rec.Body)
				}
				return
			}
			var p struct {
				Code   courier.Code `json:"code"`
				Errors []struct{ Field, Rule string }
			}
			if ok || rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Code != courier.CodeValidation {
				t.Fatalf("%s: %v %d %s, want 400 validation_failed", tc.body, ok, rec.Code, rec.Body)
			}
			if len(p.Errors) != 1 || p.Errors[0].Field != tc.field || p.Errors[0].Rule != "unknown" {
				t.Fatalf("%s: errors %+v, want field %s (unknown)", tc.body, p.Errors, tc.field)
			}
		})
	}
}

// lenient decodes itself, taking any member: the strict decode leaves
// what is inside it to it.
type lenient struct {
	A string `json:"a"`
}

func (l *lenient) UnmarshalJSON(b []byte) error {
	type plain lenient // no UnmarshalJSON method
	return json.Unmarshal(b, (*plain)(l))
}

// TestDecodeNamesUnknownMembersByPath: a member no field takes was named
// by its name alone ("x" for items[0].x), the way encoding/json reports
// the first it meets, while validation names a field by its path
// (items[0].sku). Unknown members are now named by their path, all of
// them, as validation names fields; inside a value whose type decodes
// itself they are its affair, as they were.
func TestDecodeNamesUnknownMembersByPath(t *testing.T) {
	t.Parallel()
	type item struct {
		SKU string `json:"sku" validate:"required"`
	}
	type request struct {
		Items []item               `json:"items" validate:"dive"`
		ByKey map[string]item      `json:"by_key"`
		Ref   *item                `json:"ref"`
		Empty struct{}             `json:"empty"`
		Extra json.RawMessage      `json:"extra"`
		Loose map[string]any       `json:"loose"`
		Own   lenient              `json:"own"`
		Owns  map[string][]lenient `json:"owns"`
	}
	for _, tc := range []struct {
		name   string
		body   string
		fields []string // field (rule); none: accepted
	}{
		{"top level", `{"x":1}`, []string{"x (unknown)"}},
		{"slice element", `{"items":[{"sku":"a"},{"sku":"b","x":1}]}`, []string{"items[1].x (unknown)"}},
		{"validation of the same element", `{"items":[{"sku":"a"},{"sku":""}]}`, []string{"items[1].sku (required)"}},
		{"map value", `{"by_key":{"k":{"sku":"a","x":1}}}`, []string{"by_key[k].x (unknown)"}},
		{"pointer", `{"ref":{"sku":"a","x":1}}`, []string{"ref.x (unknown)"}},
		{"a struct without fields", `{"empty":{"x":1}}`, []string{"empty.x (unknown)"}},
		{"every one, sorted", `{"x":1,"items":[{"sku":"a","y":2}],"ref":{"z":3}}`, []string{"items[0].y (unknown)", "ref.sku (required)", "ref.z (unknown)", "x (unknown)"}},
		// A refusal names what else is wrong too: a sender fixes its body
		// once, not one kind of fault a round.
		{"beside a field that fails validation", `{"x":1,"items":[{"sku":""}]}`, []string{"items[0].sku (required)", "x (unknown)"}},
		{"beside a value of the wrong type", `{"x":1,"items":[{"sku":3}]}`, []string{"items[0].sku (type)", "x (unknown)"}},
		{"inside raw JSON and maps of any", `{"extra":{"x":1},"loose":{"x":{"y":1}}}`, nil},
		{"inside a type that decodes itself", `{"own":{"a":"a","x":1},"owns":{"k":[{"x":1}]}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			var v request
			ok := jsonbody.Decode(rec, []byte(tc.body), &v, false)
			if tc.fields == nil {
				if !ok {
					t.Fatalf("%s: refused: %s", tc.body, rec.Body)
				}
				return
			}
			var p struct {
				Code   courier.Code `json:"code"`
				Errors []struct{ Field, Rule string }
			}
			if ok || rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Code != courier.CodeValidation {
				t.Fatalf("%s: %v %d %s, want 400 validation_failed", tc.body, ok, rec.Code, rec.Body)
			}
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Field+" ("+e.Rule+")")
			}
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("%s: errors %q, want %q", tc.body, got, tc.fields)
			}
		})
	}
}

// TestDecodeRefusesNamesDeepDown: a case variant or an unknown member as
// deep as a body may nest is refused as at the top, named by its path (cut
// in its middle to fieldlist.MaxPathBytes, so that its end names the
// member), and the same body spelled right is taken.
func TestDecodeRefusesNamesDeepDown(t *testing.T) {
	t.Parallel()
	const levels = 49 // 98 levels of JSON, within strictjson.MaxDepth
	deep := func(inner string) []byte {
		return []byte(strings.Repeat(`{"name":"n","children":[`, levels) + inner + strings.Repeat(`]}`, levels))
	}
	path := strings.Repeat("children[0].", levels)
	for _, tc := range []struct {
		name         string
		body         []byte
		allowUnknown bool
		fields       []string // field (rule); none: accepted
	}{
		{"exact names", deep(`{"name":"leaf","children":[]}`), false, nil},
		{"case variant", deep(`{"NAME":"leaf"}`), true, []string{fieldlist.Cut(path+"NAME") + " (unknown)"}},
		{"unknown member", deep(`{"name":"leaf","x":1}`), false, []string{fieldlist.Cut(path+"x") + " (unknown)"}},
		{"unknown member, allowed", deep(`{"name":"leaf","x":1}`), true, nil},
		{"case variant and unknown member", deep(`{"Children":[],"x":1}`), false, []string{fieldlist.Cut(path+"Children") + " (unknown)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			var v node
			ok := jsonbody.Decode(rec, tc.body, &v, tc.allowUnknown)
			if tc.fields == nil {
				if !ok {
					t.Fatalf("refused: %s", rec.Body)
				}
				return
			}
			var p struct {
				Code   courier.Code `json:"code"`
				Errors []struct{ Field, Rule string }
			}
			if ok || rec.Code != 400 || json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Code != courier.CodeValidation {
				t.Fatalf("%v %d %s, want 400 validation_failed", ok, rec.Code, rec.Body)
			}
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Field+" ("+e.Rule+")")
			}
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("errors %q, want %q", got, tc.fields)
			}
		})
	}
}

// TestDecodeMemory: decoding a 1 MiB body whose bulk is many small
// values costs about what encoding/json takes to decode it, not a node of
// a parsed tree per value (tens of megabytes for a body of [0,0,...]).
func TestDecodeMemory(t *testing.T) {
	const item = `{"name":"n","children":[]}`
	for _, body := range [][]byte{
		[]byte(`{"items":[0` + strings.Repeat(",0", 1<<19) + `]}`),
		[]byte(`{"items":[` + item + strings.Repeat(","+item, (1<<20)/(len(item)+1)) + `]}`),
	} {
		var v struct {
			Items json.RawMessage `json:"items"`
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ok := jsonbody.Decode(httptest.NewRecorder(), body, &v, false)
		runtime.ReadMemStats(&after)
		if !ok {
			t.Fatal("refused")
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > uint64(8*len(body)) {
			t.Errorf("Decode allocated %d bytes for a %d-byte body", n, len(body))
		}
	}
}

// TestDecodeNamesARootThatIsNotAnObject: a body that is JSON but not an
// object, decoded into a struct, is 400 validation_failed naming the root
// (field "", rule object), as the receivers name it; it named no field.
func TestDecodeNamesARootThatIsNotAnObject(t *testing.T) {
	t.Parallel()
	type request struct {
		Name string `json:"name"`
	}
	for _, body := range []string{`[]`, `["name"]`, `"name"`, `1`, `true`} {
		rec := httptest.NewRecorder()
		var v request
		if jsonbody.Decode(rec, []byte(body), &v, false) {
			t.Errorf("%s: taken", body)
			continue
		}
		var p struct {
			Code   courier.Code `json:"code"`
			Errors []struct{ Field, Rule string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 400 || p.Code != courier.CodeValidation ||
			len(p.Errors) != 1 || p.Errors[0].Field != "" || p.Errors[0].Rule != "object" {
			t.Errorf("%s: %d %s, want 400 validation_failed naming the root, rule object", body, rec.Code, rec.Body)
		}
	}
}
