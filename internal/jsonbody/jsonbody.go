// Package jsonbody is courier's one way to take a JSON request body apart:
// the media type check, the strict parse (one document, valid UTF-8, no
// duplicate keys, bounded depth), the decode that refuses unknown and
// case-variant member names, and validation. Every function that can
// refuse answers the refusal itself with a problem body and reports false,
// so a handler reads:
//
//	if !jsonbody.Decode(w, body, &req, false) {
//		return
//	}
//
// The receivers in package handler and the admin JSON API both use it, so
// that a body one of them refuses, the other refuses with the same status
// and code.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/fieldlist"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/strictjson"
)

// IsJSON reports whether contentType is application/json, with at most a
// charset parameter naming UTF-8. Media types and charset names are
// case-insensitive (RFC 9110 8.3.1, RFC 2978), so "charset=Utf-8" is
// UTF-8; any other charset is not JSON courier reads.
func IsJSON(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" { // ParseMediaType lowercases mt
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

// IsJSONRequest reports whether r declares its body JSON that IsJSON
// accepts, on exactly one Content-Type field line. The field holds one
// media type, and its lines are one comma-separated list (RFC 9110 5.3):
// two lines, even two saying application/json, are refused as
// "application/json, text/plain" on one line is, rather than read as
// whichever comes first.
func IsJSONRequest(r *http.Request) bool {
	v := r.Header.Values("Content-Type")
	return len(v) == 1 && IsJSON(v[0])
}

// Unsupported answers 415 unsupported_media_type, for a body IsJSON or
// IsJSONRequest refuses.
func Unsupported(w http.ResponseWriter) {
	problem.Error(w, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType, "use application/json")
}

// HasContentCoding reports whether r's body comes under a content coding
// (Content-Encoding: gzip, say): any coding but identity, on any of the
// field's lines. Courier reads, verifies and acknowledges the bytes it
// receives and decodes none: a compressed body is not the JSON it carries,
// and a signature may cover either form.
func HasContentCoding(r *http.Request) bool {
	for _, line := range r.Header.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(line, ",") {
			if c := strings.Trim(coding, " \t"); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// UnsupportedCoding answers 415 unsupported_media_type, for a body
// HasContentCoding finds coded, with Accept-Encoding: identity, which tells
// the sender it is the coding that is refused, not the media type (RFC
// 9110 12.5.3): send the body as it is.
func UnsupportedCoding(w http.ResponseWriter) {
	w.Header().Set("Accept-Encoding", "identity")
	problem.Error(w, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType, "send the body without a content coding (Content-Encoding)")
}

// PostJSON answers 405 to anything but POST (with Allow: POST) and 415
// to anything but JSON that IsJSONRequest accepts, sent as it is, without
// a content coding (UnsupportedCoding): the first checks of every courier
// receiver, before any body is read. It reports whether r passed them.
func PostJSON(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		problem.Error(w, http.StatusMethodNotAllowed, courier.CodeMethodNotAllowed, "use POST")
	case !IsJSONRequest(r):
		Unsupported(w)
	case HasContentCoding(r):
		UnsupportedCoding(w)
	default:
		return true
	}
	return false
}

// Check answers 400 for a body that is not one strict JSON document
// (malformed_json, or duplicate_json_key) and reports whether it is one.
func Check(w http.ResponseWriter, body []byte) bool {
	if err := strictjson.Check(body); err != nil {
		Malformed(w, err)
		return false
	}
	return true
}

// Malformed answers 400 for err, a failure of the strict parse (see
// strictjson.Parse): duplicate_json_key for a duplicate key,
// malformed_json otherwise. A canonical form's failure is NotCanonical's.
func Malformed(w http.ResponseWriter, err error) {
	code := courier.CodeMalformedJSON
	if errors.Is(err, strictjson.ErrDuplicateKey) {
		code = courier.CodeDuplicateKey
	}
	problem.Error(w, http.StatusBadRequest, code, "the body is not a valid JSON document")
}

// NotCanonical answers 400 for body, which canonical.JCS or ack.Canonical
// refused with err. A number no float64 holds (canonical.ErrNotFinite) leaves
// body a valid JSON document, which is not malformed: validation_failed,
// naming the first such number by its path, rule finite, as a wrong value
// is named. Any other error is Malformed's.
func NotCanonical(w http.ResponseWriter, body []byte, err error) {
	if errors.Is(err, canonical.ErrNotFinite) {
		if doc, perr := strictjson.Parse(body); perr == nil {
			ve := &ack.ValidationError{}
			if path, ok := strictjson.NotFinite(doc); ok && path != "" {
				ve.Fields = []ack.FieldError{{Field: path, Rule: "finite"}}
			}
			Invalid(w, ve)
			return
		}
	}
	Malformed(w, err)
}

// Decode checks body strictly (see Check), decodes it into v and validates
// it (see DecodeChecked), answering 400 itself when it cannot. Neither
// check builds a tree of body: what they keep is bounded by its depth and
// its largest object, not by how many values it holds, so a body costs
// little more than its own bytes and what v decodes it into.
func Decode(w http.ResponseWriter, body []byte, v any, allowUnknown bool) bool {
	if !Check(w, body) {
		return false
	}
	return decodeNamed(w, body, v, allowUnknown, true)
}

// DecodeChecked is Decode for a body already checked strictly. It refuses
// member names that match one of v's fields only case-insensitively, at
// any depth (encoding/json would take them for that field; see
// strictjson.CheckNames), unknown members unless allowUnknown, wrong types,
// and anything ack.Validate refuses: 400 validation_failed naming the
// fields.
func DecodeChecked(w http.ResponseWriter, body []byte, v any, allowUnknown bool) bool {
	return decodeNamed(w, body, v, allowUnknown, false)
}

// decodeNamed checks the names of body for v (see strictjson.CheckNames;
// body already checked strictly where checked), decodes body into v and
// validates it. Of the names it refuses it keeps the first fieldlist.Max,
// all a refusal names, and counts the others: a body of 60,000 unknown
// members costs no list of 60,000 paths.
func decodeNamed(w http.ResponseWriter, body []byte, v any, allowUnknown, checked bool) bool {
	variants, unknown, nVariants, nUnknown := strictjson.CheckNamesFirst(body, v, checked, fieldlist.Max)
	switch {
	case len(variants) > 0:
		invalid(w, unknownFields(variants), nVariants-len(variants))
		return false
	case len(unknown) > 0 && !allowUnknown:
		// The members v knows are decoded and validated too, so that the
		// refusal names all a sender has to fix, not one kind of fault a
		// round: a 400 ends a delivery.
		ve := unknownFields(unknown)
		if known := decodeValid(body, v, true); known != nil {
			ve.Fields = append(ve.Fields, known.Fields...)
			slices.SortStableFunc(ve.Fields, func(a, b ack.FieldError) int { return fieldlist.Compare(a.Field, b.Field) })
		}
		invalid(w, ve, nUnknown-len(unknown))
		return false
	}
	if ve := decodeValid(body, v, allowUnknown); ve != nil {
		Invalid(w, ve)
		return false
	}
	return true
}

// decodeValid decodes body into v (see decode) and validates it: nil when
// both pass; otherwise the fields the decode refused or, when it passed,
// those validation did (a value of the wrong type is not validated as
// well: it would fail as missing).
func decodeValid(body []byte, v any, allowUnknown bool) *ack.ValidationError {
	if err := decode(body, v, allowUnknown); err != nil {
		if ve := decodeError(body, v, err); ve != nil {
			return ve
		}
		return &ack.ValidationError{}
	}
	if err := ack.Validate(v); err != nil {
		var ve *ack.ValidationError
		if errors.As(err, &ve) {
			return ve
		}
		return &ack.ValidationError{}
	}
	return nil
}

// Invalid answers 400 validation_failed listing ve's fields (none when ve
// is nil).
func Invalid(w http.ResponseWriter, ve *ack.ValidationError) {
	invalid(w, ve, 0)
}

// invalid is Invalid for ve and omitted more failing fields it does not
// list.
func invalid(w http.ResponseWriter, ve *ack.ValidationError, omitted int) {
	p := problem.New(http.StatusBadRequest, courier.CodeValidation, "the request is not valid")
	if ve != nil {
		p.Errors = ve.Fields
	}
	p.Omitted = omitted
	problem.Write(w, p)
}

// decode decodes a body Check has accepted, and whose member names
// decodeNamed has checked, into v. The walk refuses the members whose
// names match one of v's fields, at any depth, only case-insensitively
// (encoding/json would take them for that field, so a body could carry a
// value under a name no one checks) and, unless allowUnknown, the members
// that match no field, named by their path as validation names fields
// (items[0].x), where encoding/json would name the first of them by its
// name alone.
func decode(body []byte, v any, allowUnknown bool) error {
	if allowUnknown {
		return json.Unmarshal(body, v)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields() // still: for what the walk leaves to a type's own decoding
	return dec.Decode(v)
}

// unknownFields is the refusal of the members at paths: rule unknown.
func unknownFields(paths []string) *ack.ValidationError {
	ve := &ack.ValidationError{}
	for _, p := range paths {
		ve.Fields = append(ve.Fields, ack.FieldError{Field: p, Rule: "unknown"})
	}
	return ve
}

// decodeError is DecodeError for err, from decoding body into v, naming
// the value it is about by its path in body, as validation names fields,
// where encoding/json names it otherwise (a wrong type in an array's
// element or a map's value, or in a promoted field of an embedded
// struct) or not at all (a value that decodes itself, a time, a
// json.Number): see strictjson.PathOf.
func decodeError(body []byte, v any, err error) *ack.ValidationError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field == "" && te.Type != nil && te.Type.Kind() == reflect.Struct {
		// The document itself is not an object ([], "x", 1): named as
		// the receivers name it (ack's exactMembers), the root's path "".
		return &ack.ValidationError{Fields: []ack.FieldError{{Field: "", Rule: "object"}}}
	}
	ve := DecodeError(err)
	if ve != nil && !errors.As(err, &te) {
		return ve // a refusal that names its fields already
	}
	if path, ok := strictjson.PathOf(body, v, err); ok {
		return &ack.ValidationError{Fields: []ack.FieldError{{Field: path, Rule: "type"}}}
	}
	return ve
}

// DecodeError turns an encoding/json error from decoding a payload into a
// *ValidationError naming the field, when it concerns one field (a wrong
// type, an unknown field); otherwise it returns nil.
func DecodeError(err error) *ack.ValidationError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &ack.ValidationError{Fields: []ack.FieldError{{Field: te.Field, Rule: "type"}}}
	}
	var ve *ack.ValidationError
	if errors.As(err, &ve) {
		return ve
	}
	const unknown = "json: unknown field "
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		return &ack.ValidationError{Fields: []ack.FieldError{{Field: strings.Trim(msg[len(unknown):], `"`), Rule: "unknown"}}}
	}
	return nil
}
