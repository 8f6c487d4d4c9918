// Package strictjson reads JSON the way courier trusts it: exactly one
// document, valid UTF-8, no object with a key twice at any depth, at most
// MaxDepth levels, nothing after the value. Numbers keep their literal text
// and members their order, for the canonical forms package ack writes.
// Every reader of untrusted JSON in courier (receivers, the Ack parser,
// the AdCP HMAC signer's duplicate-key check) goes through it, so they all
// refuse the same documents.
package strictjson

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects a JSON document may
// have. Deeper documents are rejected as malformed before anything else reads
// them.
const MaxDepth = 100

// Errors of the strict JSON reader. Both are content-free.
var (
	ErrMalformed    = errors.New("malformed JSON")
	ErrDuplicateKey = errors.New("duplicate object key")
)

// Kind is the type of a JSON value in a parsed document.
type Kind uint8

// Kinds.
const (
	Null Kind = iota
	False
	True
	Number
	String
	Array
	Object
)

// Value is one node of a parsed JSON document. Numbers keep their literal
// text; strings are decoded; object members keep document order until a
// renderer sorts them.
type Value struct {
	Kind    Kind
	Text    string // number literal or decoded string
	Items   []Value
	Members []Member
}

// Member is one member of an object.
type Member struct {
	Key string
	Val Value
}

// Parse reads exactly one JSON document (RFC 8259) from b, strictly: valid
// UTF-8, no duplicate keys in any object, at most MaxDepth levels, nothing
// but whitespace after the value. Errors wrap ErrMalformed or
// ErrDuplicateKey and name an offset, never content.
func Parse(b []byte) (Value, error) {
	p := parser{b: b}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.space()
	if p.i != len(p.b) {
		return Value{}, p.fail("data after the document")
	}
	return v, nil
}

// Check reports whether b is one strict JSON document: valid UTF-8, no
// duplicate object keys, at most MaxDepth levels of nesting. The error wraps
// ErrMalformed or ErrDuplicateKey.
func Check(b []byte) error {
	_, err := Parse(b)
	return err
}

type parser struct {
	b []byte
	i int
}

func (p *parser) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrMalformed, what, p.i)
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
	if p.i >= len(p.b) {
		return Value{}, p.fail("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.string()
		return Value{Kind: String, Text: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return Value{Kind: True}, p.literal("true")
	case c == 'f':
		return Value{Kind: False}, p.literal("false")
	case c == 'n':
		return Value{Kind: Null}, p.literal("null")
	}
	return Value{}, p.fail("unexpected character")
}

func (p *parser) literal(word string) error {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return p.fail("invalid literal")
	}
	p.i += len(word)
	return nil
}

func (p *parser) object(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.fail("nesting too deep")
	}
	p.i++ // {
	v := Value{Kind: Object}
	var seen map[string]struct{} // built once an object outgrows a linear scan
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return Value{}, p.fail("expected object key")
		}
		key, err := p.string()
		if err != nil {
			return Value{}, err
		}
		if p.duplicate(&seen, v.Members, key) {
			return Value{}, fmt.Errorf("%w at offset %d", ErrDuplicateKey, p.i)
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return Value{}, p.fail("expected ':'")
		}
		p.i++
		p.space()
		val, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		v.Members = append(v.Members, Member{Key: key, Val: val})
		if done, err := p.separator('}'); done || err != nil {
			return v, err
		}
	}
}

// duplicate reports whether key is already among members. Small objects are
// scanned; from linearScanLimit members on, a set keeps the check linear in
// the size of the document so that hostile input cannot make it quadratic.
func (p *parser) duplicate(seen *map[string]struct{}, members []Member, key string) bool {
	const linearScanLimit = 16
	if len(members) < linearScanLimit {
		for _, m := range members {
			if m.Key == key {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*len(members))
		for _, m := range members {
			(*seen)[m.Key] = struct{}{}
		}
	}
	if _, ok := (*seen)[key]; ok {
		return true
	}
	(*seen)[key] = struct{}{}
	return false
}

func (p *parser) array(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.fail("nesting too deep")
	}
	p.i++ // [
	v := Value{Kind: Array}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		p.space()
		item, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		v.Items = append(v.Items, item)
		if done, err := p.separator(']'); done || err != nil {
			return v, err
		}
	}
}

// separator consumes what follows a member or an item: ',' (more to come)
// or the closing bracket (done).
func (p *parser) separator(closing byte) (done bool, err error) {
	p.space()
	if p.i >= len(p.b) {
		return false, p.fail("unexpected end")
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		return false, nil
	case closing:
		p.i++
		return true, nil
	}
	return false, p.fail("expected ',' or '" + string(closing) + "'")
}

// number scans an RFC 8259 number and keeps its literal text.
func (p *parser) number() (Value, error) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return Value{}, p.fail("invalid number")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return Value{}, p.fail("invalid number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return Value{}, p.fail("invalid number")
		}
	}
	return Value{Kind: Number, Text: string(p.b[start:p.i])}, nil
}

func (p *parser) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// string decodes a JSON string starting at the opening quote.
func (p *parser) string() (string, error) {
	p.i++ // "
	start := p.i
	// Fast path: no escapes, all ASCII printable or valid UTF-8.
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			p.i++
			continue
		}
		r, size := utf8.DecodeRune(p.b[p.i:])
		if r == utf8.RuneError && size == 1 {
			return "", p.fail("invalid UTF-8")
		}
		p.i += size
	}
	buf := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			buf = utf8.AppendRune(buf, r)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", p.fail("invalid UTF-8")
			}
			buf = append(buf, p.b[p.i:p.i+size]...)
			p.i += size
		}
	}
	return "", p.fail("unterminated string")
}

// escape decodes one backslash escape, joining UTF-16 surrogate pairs. A lone
// surrogate is malformed: it has no UTF-8 encoding.
func (p *parser) escape() (rune, error) {
	p.i++ // backslash
	if p.i >= len(p.b) {
		return 0, p.fail("unterminated escape")
	}
	c := p.b[p.i]
	p.i++
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		if r >= 0xDC00 || len(p.b)-p.i < 2 || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
			return 0, p.fail("lone surrogate")
		}
		p.i += 2
		lo, err := p.hex4()
		if err != nil {
			return 0, err
		}
		joined := utf16.DecodeRune(r, lo)
		if joined == utf8.RuneError {
			return 0, p.fail("lone surrogate")
		}
		return joined, nil
	}
	return 0, p.fail("invalid escape")
}

func (p *parser) hex4() (rune, error) {
	if len(p.b)-p.i < 4 {
		return 0, p.fail("short unicode escape")
	}
	n, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, p.fail("invalid unicode escape")
	}
	p.i += 4
	return rune(n), nil
}
