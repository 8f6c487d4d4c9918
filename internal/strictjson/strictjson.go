// Package strictjson reads JSON the way courier trusts it: exactly one
// document, valid UTF-8, no object with a key twice at any depth, at most
// MaxDepth levels, nothing after the value. Numbers keep their literal text
// and members their order, for readers that judge a number by how it is
// written.
// Every reader of untrusted JSON in courier (receivers, the Ack parser,
// the AdCP HMAC signer's duplicate-key check) goes through it, so they all
// refuse the same documents.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
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
//
// b is read twice: first as Check reads it, counting the items and members
// of each array and object, then to build the tree, each array and object
// in one allocation of its size. A document Parse refuses costs no tree,
// and one it takes costs its tree and no more.
func Parse(b []byte) (Value, error) {
	p := parser{b: b, counting: true}
	if err := p.document(); err != nil {
		return Value{}, err
	}
	p.i, p.counting, p.build = 0, false, true
	p.space()
	return p.value(0) // read once already: it fails no more
}

// Check reports whether b is one strict JSON document: valid UTF-8, no
// duplicate object keys, at most MaxDepth levels of nesting. The error wraps
// ErrMalformed or ErrDuplicateKey, as Parse's does for the same b. It reads
// b as Parse does without building the tree, so what it keeps is bounded by
// the depth of b and the members of its largest object, not by how many
// values b holds.
func Check(b []byte) error {
	p := parser{b: b}
	return p.document()
}

// parser reads one document. Without build, it reports only whether the
// document is strict, and its Values are empty; with build, it returns the
// tree of Values of a document it has read so before, counting.
type parser struct {
	b     []byte
	i     int
	build bool
	open  []openObject // per depth, the object being read there
	// sizes holds the number of items or members of each array and
	// object, in the order they open: counted when counting, then read
	// back from next when building.
	sizes    []int32
	next     int
	counting bool
}

// document reads b whole: one value, and nothing after it but whitespace.
func (p *parser) document() error {
	p.space()
	if _, err := p.value(0); err != nil {
		return err
	}
	p.space()
	if p.i != len(p.b) {
		return p.fail("data after the document")
	}
	return nil
}

// size returns where the count of the array or object opening is kept
// when counting, and, when building, the room to make for its items or
// members.
func (p *parser) size() (slot, room int) {
	switch {
	case p.counting:
		p.sizes = append(p.sizes, 0)
		return len(p.sizes) - 1, 0
	case p.build:
		p.next++
		return -1, int(p.sizes[p.next-1])
	}
	return -1, 0
}

// openObject holds the keys an object has had so far, for the duplicate
// check. Only one object is open at each depth, so each depth's is reused.
type openObject struct {
	keys [][]byte // decoded; where no escape, slices of the document
	// sorted is whether keys are in increasing order, so far.
	sorted bool
	// table indexes keys once the object outgrows a linear scan: open
	// addressing by a hash under seed, each slot a position in keys plus
	// one, 0 for none. It costs no allocation per key, only as it grows.
	table []int32
	seed  maphash.Seed
}

func (p *parser) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrMalformed, what, p.i)
}

func (p *parser) space() { p.i = SkipSpace(p.b, p.i) }

// SkipSpace returns the offset of the first byte of b from i on that is
// not JSON whitespace (space, tab, line feed, carriage return), len(b) if
// none is.
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
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
		s, err := p.stringBytes()
		if err != nil || !p.build {
			return Value{}, err
		}
		return Value{Kind: String, Text: string(s)}, nil
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
	slot, room := p.size()
	if room > 0 {
		v.Members = make([]Member, 0, room)
	}
	if !p.build { // a document is built once it has been read whole
		for len(p.open) <= depth {
			p.open = append(p.open, openObject{})
		}
		o := &p.open[depth]
		o.keys, o.table = o.keys[:0], o.table[:0]
	}
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
		key, err := p.stringBytes()
		if err != nil {
			return Value{}, err
		}
		if !p.build && p.open[depth].duplicate(key) {
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
		if p.build {
			v.Members = append(v.Members, Member{Key: string(key), Val: val})
		}
		if slot >= 0 {
			p.sizes[slot]++
		}
		if done, err := p.separator('}'); done || err != nil {
			return v, err
		}
	}
}

// duplicate reports whether key is already among o's keys, and adds it.
// Keys in increasing order, as a canonical form or a sorting encoder
// writes them, are each compared with the one before only. Otherwise
// small objects are scanned; from linearScanLimit members on, a hash
// table keeps the check linear in the size of the document so that
// hostile input cannot make it quadratic, its seed random so that no
// document can make the keys collide.
func (o *openObject) duplicate(key []byte) bool {
	const linearScanLimit = 16
	if n := len(o.keys); len(o.table) == 0 {
		if n == 0 || o.sorted && bytes.Compare(o.keys[n-1], key) < 0 {
			o.sorted = true // after every key before it, so none of them
			o.keys = append(o.keys, key)
			return false
		}
		o.sorted = false
		if n < linearScanLimit {
			for _, k := range o.keys {
				if bytes.Equal(k, key) {
					return true
				}
			}
			o.keys = append(o.keys, key)
			return false
		}
		o.index()
	}
	mask := uint64(len(o.table) - 1)
	i := maphash.Bytes(o.seed, key) & mask
	for ; o.table[i] != 0; i = (i + 1) & mask {
		if bytes.Equal(o.keys[o.table[i]-1], key) {
			return true
		}
	}
	o.keys = append(o.keys, key)
	if 2*len(o.keys) > len(o.table) {
		o.index()
	} else {
		o.table[i] = int32(len(o.keys))
	}
	return false
}

// index makes o.table a table of all o.keys at most half full.
func (o *openObject) index() {
	if o.table == nil {
		o.seed = maphash.MakeSeed()
	}
	n := 64
	for n < 2*len(o.keys) {
		n *= 2
	}
	if cap(o.table) >= n {
		o.table = o.table[:n]
		clear(o.table)
	} else {
		o.table = make([]int32, n)
	}
	mask := uint64(n - 1)
	for j, k := range o.keys {
		i := maphash.Bytes(o.seed, k) & mask
		for o.table[i] != 0 {
			i = (i + 1) & mask
		}
		o.table[i] = int32(j + 1)
	}
}

func (p *parser) array(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.fail("nesting too deep")
	}
	p.i++ // [
	v := Value{Kind: Array}
	slot, room := p.size()
	if room > 0 {
		v.Items = make([]Value, 0, room)
	}
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
		if p.build {
			v.Items = append(v.Items, item)
		}
		if slot >= 0 {
			p.sizes[slot]++
		}
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
	if !p.build {
		return Value{}, nil
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

// stringBytes decodes a JSON string starting at the opening quote. Without
// an escape, the bytes are the document's own, to be copied before they
// are kept.
func (p *parser) stringBytes() ([]byte, error) {
	p.i++ // "
	start := p.i
	// Fast path: no escapes, all ASCII printable or valid UTF-8.
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			return s, nil
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
			return nil, p.fail("invalid UTF-8")
		}
		p.i += size
	}
	buf := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return buf, nil
		case c < 0x20:
			return nil, p.fail("control character in string")
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return nil, err
			}
			buf = utf8.AppendRune(buf, r)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				return nil, p.fail("invalid UTF-8")
			}
			buf = append(buf, p.b[p.i:p.i+size]...)
			p.i += size
		}
	}
	return nil, p.fail("unterminated string")
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
