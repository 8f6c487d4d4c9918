// Package canonical writes the two canonical forms of a JSON document that
// courier's wire contract uses: Python's json.dumps form (Python, which
// ack.Canonical returns and documents: the form notifications are digested,
// compared and stored in) and RFC 8785's (JCS, the form a reporting
// receiver judges "same body" by). Both read the document strictly, as
// package strictjson does.
package canonical

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/strictjson"
)

// ErrNotFinite reports a number that has no finite IEEE 754 value (it
// overflows to ±Inf). Python refuses such a number with a fraction or
// an exponent, as Python's json.dumps does with allow_nan=False (an
// integer it keeps exactly, of any size); JCS refuses any such number.
// The error it is wrapped in has code courier.CodePayloadInvalid.
var ErrNotFinite = errors.New("ack: number is not finite")

// Python returns the canonical form of the JSON document doc that Python
// writes: what ack.Canonical returns, and documents.
func Python(doc []byte) ([]byte, error) {
	return pythonForm.write(doc)
}

// Marshal encodes v with encoding/json and returns its canonical form
// (Python's). An error of encoding/json's has code
// courier.CodeInvalidArgument.
func Marshal(v any) ([]byte, error) {
	doc, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", courier.CodeInvalidArgument, err)
	}
	return Python(doc)
}

// encoder writes a document in one canonical form. The two forms courier
// uses differ only in how numbers are written and how object keys are
// ordered.
type encoder struct {
	number  func(dst, lit []byte) ([]byte, error)
	compare func(a, b []byte) int
}

var (
	// pythonForm matches Python's json.dumps(sort_keys=True, ...).
	// Comparing keys by their UTF-8 bytes orders them by code point, as
	// Python's str ordering does.
	pythonForm = encoder{number: appendPythonNumber, compare: bytes.Compare}
	// jcsForm is RFC 8785: ECMAScript numbers, keys ordered by UTF-16 units.
	jcsForm = encoder{number: appendJCSNumber, compare: compareUTF16}
)

// write returns the canonical form of doc, which it first reads as
// strictjson.Check does, refusing what Check refuses. It then writes the
// form from doc's bytes, without a tree of its values: arrays and scalars
// as they are read; each object's members one after another, then put in
// key order by their spans in the output. What it keeps besides the
// output is an entry per member of the objects open at a point and one
// copy of the largest object's output.
func (e encoder) write(doc []byte) ([]byte, error) {
	if err := strictjson.Check(doc); err != nil {
		return nil, WithCode(err)
	}
	w := writer{encoder: e, doc: doc, dst: make([]byte, 0, len(doc))}
	w.space()
	if err := w.value(); err != nil {
		return nil, WithCode(err)
	}
	return w.dst, nil
}

// WithCode gives err, a document refused as strictjson refuses it or
// for a number that is not finite, the code a receiver answers such a
// body with: duplicate_json_key, payload_invalid (a valid document,
// whose number is a wrong value: a receiver's validation_failed) or
// malformed_json. errors.Is still finds err's own cause.
func WithCode(err error) error {
	code := courier.CodeMalformedJSON
	switch {
	case errors.Is(err, strictjson.ErrDuplicateKey):
		code = courier.CodeDuplicateKey
	case errors.Is(err, ErrNotFinite):
		code = courier.CodePayloadInvalid
	}
	return fmt.Errorf("%w: %w", code, err)
}

// writer writes the canonical form of a document Check has accepted, so
// it reads the document's bytes without checking them again.
type writer struct {
	encoder
	doc []byte
	i   int
	dst []byte
	// members holds the members written so far of each object open, the
	// innermost last, and keys the keys among them that had escapes,
	// decoded.
	members []memberSpan
	keys    []byte
	// scratch holds an object's members while they are written back in
	// key order; text holds a string's decoded text.
	scratch, text []byte
}

// memberSpan is one member of an object: where its decoded key is, in
// the document from keyStart or, where keyStart is negative, in keys from
// -keyStart-1, up to keyEnd; and where `"key":value` is in the output.
type memberSpan struct {
	keyStart, keyEnd int
	start, end       int
}

func (w *writer) key(m memberSpan) []byte {
	if m.keyStart < 0 {
		return w.keys[-m.keyStart-1 : m.keyEnd]
	}
	return w.doc[m.keyStart:m.keyEnd]
}

func (w *writer) space() { w.i = strictjson.SkipSpace(w.doc, w.i) }

// next returns the byte after any whitespace, and consumes it.
func (w *writer) next() byte {
	w.space()
	w.i++
	return w.doc[w.i-1]
}

func (w *writer) value() error {
	switch w.doc[w.i] {
	case '{':
		return w.object()
	case '[':
		return w.array()
	case '"':
		text, _ := w.string()
		w.dst = AppendString(w.dst, text)
		return nil
	case 't':
		w.i += len("true")
		w.dst = append(w.dst, "true"...)
		return nil
	case 'f':
		w.i += len("false")
		w.dst = append(w.dst, "false"...)
		return nil
	case 'n':
		w.i += len("null")
		w.dst = append(w.dst, "null"...)
		return nil
	}
	start := w.i
	for w.i < len(w.doc) && strings.IndexByte("+-.0123456789eE", w.doc[w.i]) >= 0 {
		w.i++
	}
	var err error
	w.dst, err = w.number(w.dst, w.doc[start:w.i])
	return err
}

func (w *writer) array() error {
	w.i++ // [
	w.dst = append(w.dst, '[')
	if w.space(); w.doc[w.i] == ']' {
		w.i++
		w.dst = append(w.dst, ']')
		return nil
	}
	for {
		w.space()
		if err := w.value(); err != nil {
			return err
		}
		if w.next() == ']' {
			w.dst = append(w.dst, ']')
			return nil
		}
		w.dst = append(w.dst, ',')
	}
}

func (w *writer) object() error {
	w.i++ // {
	w.dst = append(w.dst, '{')
	if w.space(); w.doc[w.i] == '}' {
		w.i++
		w.dst = append(w.dst, '}')
		return nil
	}
	start, base, keysBase := len(w.dst), len(w.members), len(w.keys)
	for {
		w.space()
		m := memberSpan{keyStart: w.i + 1, start: len(w.dst)}
		key, decoded := w.string()
		m.keyEnd = m.keyStart + len(key)
		if decoded { // in text, which the next string reuses
			m.keyStart = -len(w.keys) - 1
			w.keys = append(w.keys, key...)
			m.keyEnd = len(w.keys)
		}
		w.dst = AppendString(w.dst, key)
		w.dst = append(w.dst, ':')
		w.next() // :
		w.space()
		if err := w.value(); err != nil {
			return err
		}
		m.end = len(w.dst)
		w.members = append(w.members, m)
		if w.next() == '}' {
			break
		}
		w.dst = append(w.dst, ',')
	}
	w.sortMembers(start, w.members[base:])
	w.members, w.keys = w.members[:base], w.keys[:keysBase]
	w.dst = append(w.dst, '}')
	return nil
}

// sortMembers puts the members of the object whose output starts at
// start, which are ms, in key order.
func (w *writer) sortMembers(start int, ms []memberSpan) {
	byKey := func(a, b memberSpan) int { return w.compare(w.key(a), w.key(b)) }
	if slices.IsSortedFunc(ms, byKey) {
		return
	}
	slices.SortFunc(ms, byKey)
	w.scratch = append(w.scratch[:0], w.dst[start:]...)
	w.dst = w.dst[:start]
	for i, m := range ms {
		if i > 0 {
			w.dst = append(w.dst, ',')
		}
		w.dst = append(w.dst, w.scratch[m.start-start:m.end-start]...)
	}
}

// string reads the string at w.i and returns its decoded text: the
// document's own bytes when it has no escape, else (decoded) w.text,
// which the next string read overwrites.
func (w *writer) string() (text []byte, decoded bool) {
	w.i++ // "
	start := w.i
	for w.doc[w.i] != '"' && w.doc[w.i] != '\\' {
		w.i++
	}
	if w.doc[w.i] == '"' {
		w.i++
		return w.doc[start : w.i-1], false
	}
	w.text = append(w.text[:0], w.doc[start:w.i]...)
	for {
		switch c := w.doc[w.i]; c {
		case '"':
			w.i++
			return w.text, true
		case '\\':
			w.text = utf8.AppendRune(w.text, w.escape())
		default:
			w.text = append(w.text, c)
			w.i++
		}
	}
}

// escape decodes the escape at w.i, a surrogate pair as one rune.
func (w *writer) escape() rune {
	c := w.doc[w.i+1]
	w.i += 2
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'u':
		r := w.hex4()
		if utf16.IsSurrogate(r) { // Check took it: a high surrogate, then \u and a low one
			w.i += 2
			r = utf16.DecodeRune(r, w.hex4())
		}
		return r
	}
	return rune(c) // " \ /
}

func (w *writer) hex4() rune {
	var r rune
	for _, c := range w.doc[w.i : w.i+4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	w.i += 4
	return r
}

// AppendString writes s as a JSON string the way Python's encoder does with
// ensure_ascii=False: only '"', '\\' and control characters are escaped,
// with the short forms for \b \f \n \r \t and lowercase \u00XX otherwise.
func AppendString[S string | []byte](dst []byte, s S) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// IsInteger reports whether a JSON number literal has neither fraction nor
// exponent, which is what makes Python read it as an int.
func IsInteger[S string | []byte](lit S) bool {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// appendPythonNumber writes a number literal as Python re-encodes it: an
// integer literal exactly (Python ints are unbounded; "-0" becomes "0"),
// anything else as repr(float(lit)).
func appendPythonNumber(dst, lit []byte) ([]byte, error) {
	if IsInteger(lit) {
		if string(lit) == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, lit...), nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%w: %s", ErrNotFinite, "float out of range")
	}
	return appendPythonFloat(dst, f), nil
}

// shortest returns the shortest decimal digits that round-trip f (without
// sign or leading zeros) and the decimal point position: |f| = 0.digits × 10^point.
func shortest(f float64) (digits string, point int) {
	e := strconv.FormatFloat(math.Abs(f), 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	return strings.Replace(mant, ".", "", 1), x + 1
}

// appendPythonFloat writes f as Python's repr(float) does: positional
// notation with at least one fractional digit when -4 < point <= 16,
// otherwise d.ddde±XX with an exponent of at least two digits.
func appendPythonFloat(dst []byte, f float64) []byte {
	if math.Signbit(f) {
		dst = append(dst, '-')
	}
	digits, point := shortest(f)
	if digits == "0" {
		return append(dst, "0.0"...)
	}
	if point > -4 && point <= 16 {
		return appendPositional(dst, digits, point, true)
	}
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	exp := point - 1
	dst = append(dst, 'e')
	if exp < 0 {
		dst = append(dst, '-')
		exp = -exp
	} else {
		dst = append(dst, '+')
	}
	if exp < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(exp), 10)
}

// appendPositional writes digits × 10^(point-len(digits)) without an
// exponent; dotZero adds ".0" to a whole number, as Python's repr does.
func appendPositional(dst []byte, digits string, point int, dotZero bool) []byte {
	switch {
	case point <= 0:
		dst = append(dst, "0."...)
		dst = append(dst, strings.Repeat("0", -point)...)
		return append(dst, digits...)
	case point >= len(digits):
		dst = append(dst, digits...)
		dst = append(dst, strings.Repeat("0", point-len(digits))...)
		if dotZero {
			dst = append(dst, ".0"...)
		}
		return dst
	}
	dst = append(dst, digits[:point]...)
	dst = append(dst, '.')
	return append(dst, digits[point:]...)
}

// JCS returns the RFC 8785 (JSON Canonicalization Scheme) form of doc: keys
// sorted by UTF-16 code units, numbers serialized as ECMAScript does. The
// reporting profile judges "same body" on this form, so a sender that
// re-serializes the same JSON is not taken for a collision. doc is read,
// and refused with the same codes, as Python reads it; and since
// RFC 8785 writes every number as a double, an integer no float64 holds
// is refused too (ErrNotFinite), where Python keeps it.
func JCS(doc []byte) ([]byte, error) {
	return jcsForm.write(doc)
}

func appendJCSNumber(dst, lit []byte) ([]byte, error) {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%w: %s", ErrNotFinite, "float out of range")
	}
	return appendECMAScriptNumber(dst, f), nil
}

// compareUTF16 orders a and b by their UTF-16 code units, as RFC 8785
// sorts keys, without encoding them: keys are compared on every step of a
// sort. Bytes that are not UTF-8 count as U+FFFD, as converting to runes
// makes them. Runes that differ order as their code units do by
// utf16Order; equal ASCII bytes are passed over without decoding.
func compareUTF16(a, b []byte) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if c := a[i]; c < utf8.RuneSelf && c == b[j] {
			i++
			j++
			continue
		}
		ra, na := utf8.DecodeRune(a[i:])
		rb, nb := utf8.DecodeRune(b[j:])
		if ra != rb {
			return cmp.Compare(utf16Order(ra), utf16Order(rb))
		}
		i += na
		j += nb
	}
	return cmp.Compare(len(a)-i, len(b)-j) // the one with code units left is the greater
}

// utf16Order maps a rune to a number that orders runes as their first
// differing UTF-16 code units do. Code point order is UTF-16 order but
// for one case: a rune from U+10000 on is written as surrogates,
// U+D800 to U+DFFF, which sort before U+E000 to U+FFFF. Moving those above
// every other rune restores the order; no rune is a surrogate itself.
func utf16Order(r rune) rune {
	if r >= 0xE000 && r <= 0xFFFF {
		return r + unicode.MaxRune
	}
	return r
}

// appendECMAScriptNumber writes f as ECMAScript's Number::toString does
// (RFC 8785 §3.2.2.3).
func appendECMAScriptNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // -0 too
	}
	if f < 0 {
		dst = append(dst, '-')
	}
	digits, point := shortest(f)
	if point > -6 && point <= 21 {
		return appendPositional(dst, digits, point, false)
	}
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	if point-1 >= 0 {
		dst = append(dst, '+')
	}
	return strconv.AppendInt(dst, int64(point-1), 10)
}
