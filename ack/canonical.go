package ack

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/courier-go/courier/internal/strictjson"
)

// ErrNotFinite reports a number that has no finite IEEE 754 value (it
// overflows to ±Inf). Canonical JSON rejects it as Python does with
// allow_nan=False.
var ErrNotFinite = errors.New("ack: number is not finite")

// Canonical returns the canonical form of the JSON document doc: object keys
// sorted by code point, no insignificant whitespace, UTF-8 output without
// HTML escaping or escaping of U+2028/U+2029, integers kept exactly, other
// numbers in their shortest round-trip form. The output equals, byte for
// byte, what Python produces for the same document with
//
//	json.dumps(json.loads(doc), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
//
// doc is read strictly: duplicate keys, invalid UTF-8, lone
// surrogates and excessive nesting are errors.
func Canonical(doc []byte) ([]byte, error) {
	v, err := strictjson.Parse(doc)
	if err != nil {
		return nil, err
	}
	return appendCanonical(make([]byte, 0, len(doc)), v)
}

// Marshal encodes v with encoding/json and returns its canonical form.
func Marshal(v any) ([]byte, error) {
	doc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonical(doc)
}

// encoder writes a parsed document in one canonical form. The two forms
// courier uses differ only in how numbers are written and how object keys
// are ordered.
type encoder struct {
	number  func(dst []byte, lit string) ([]byte, error)
	compare func(a, b string) int
}

var (
	// pythonForm matches Python's json.dumps(sort_keys=True, ...). Go
	// compares strings by their UTF-8 bytes, which orders them by code
	// point, as Python's str ordering does.
	pythonForm = encoder{number: appendPythonNumber, compare: strings.Compare}
	// jcsForm is RFC 8785: ECMAScript numbers, keys ordered by UTF-16 units.
	jcsForm = encoder{number: appendJCSNumber, compare: compareUTF16}
)

func appendCanonical(dst []byte, v strictjson.Value) ([]byte, error) {
	return pythonForm.append(dst, v)
}

func (e encoder) append(dst []byte, v strictjson.Value) ([]byte, error) {
	var err error
	switch v.Kind {
	case strictjson.Null:
		return append(dst, "null"...), nil
	case strictjson.True:
		return append(dst, "true"...), nil
	case strictjson.False:
		return append(dst, "false"...), nil
	case strictjson.String:
		return appendString(dst, v.Text), nil
	case strictjson.Number:
		return e.number(dst, v.Text)
	case strictjson.Array:
		dst = append(dst, '[')
		for i, item := range v.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = e.append(dst, item); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	members := slices.Clone(v.Members)
	slices.SortFunc(members, func(a, b strictjson.Member) int { return e.compare(a.Key, b.Key) })
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, m.Key)
		dst = append(dst, ':')
		if dst, err = e.append(dst, m.Val); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendString writes s as a JSON string the way Python's encoder does with
// ensure_ascii=False: only '"', '\\' and control characters are escaped,
// with the short forms for \b \f \n \r \t and lowercase \u00XX otherwise.
func appendString(dst []byte, s string) []byte {
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

// isInteger reports whether a JSON number literal has neither fraction nor
// exponent, which is what makes Python read it as an int.
func isInteger(lit string) bool {
	return !strings.ContainsAny(lit, ".eE")
}

// appendPythonNumber writes a number literal as Python re-encodes it: an
// integer literal exactly (Python ints are unbounded; "-0" becomes "0"),
// anything else as repr(float(lit)).
func appendPythonNumber(dst []byte, lit string) ([]byte, error) {
	if isInteger(lit) {
		if lit == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, lit...), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
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
// re-serializes the same JSON is not taken for a collision.
func JCS(doc []byte) ([]byte, error) {
	v, err := strictjson.Parse(doc)
	if err != nil {
		return nil, err
	}
	return jcsForm.append(make([]byte, 0, len(doc)), v)
}

func appendJCSNumber(dst []byte, lit string) ([]byte, error) {
	f, err := strconv.ParseFloat(lit, 64)
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
func compareUTF16(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if c := a[i]; c < utf8.RuneSelf && c == b[j] {
			i++
			j++
			continue
		}
		ra, na := utf8.DecodeRuneInString(a[i:])
		rb, nb := utf8.DecodeRuneInString(b[j:])
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
