package signature

import (
	"errors"
	"strconv"
	"strings"
)

// This file parses and serializes the subset of RFC 8941 Structured Field
// Values that Signature-Input, Signature and Content-Digest use:
// dictionaries whose members are items or inner lists, with parameters.
// Byte sequences are kept as their raw text between the colons and decoded
// by decodeSFBinary, which reads RFC 8941's padded standard base64 and
// AdCP's unpadded base64url, each used consistently.

// Bounds of the structured-field parser.
const (
	maxSFMembers = 64 // dictionary members and inner-list items
	maxSFParams  = 32 // parameters of one item or inner list
	maxSFKey     = 64 // bytes of a dictionary or parameter key
	maxSFString  = 1024
)

type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBool
)

// sfItem is a bare item with its parameters.
type sfItem struct {
	kind   sfKind
	str    string // string, token, raw byte sequence, decimal text
	num    int64
	bool   bool
	params []sfParam
}

type sfParam struct {
	key string
	val sfItem // bare: no params
}

// sfMember is one dictionary member: an item, or an inner list with the
// list's parameters.
type sfMember struct {
	key    string
	isList bool
	item   sfItem
	list   []sfItem
	params []sfParam // of the inner list
}

var errSF = errors.New("malformed structured field")

type sfParser struct {
	s   string
	pos int
}

// parseSFDictionary parses an RFC 8941 dictionary. A key that appears twice
// is an error: for signature headers, two meanings of one label are an
// attack, not a convenience.
func parseSFDictionary(s string) ([]sfMember, error) {
	p := sfParser{s: s}
	p.skipSP()
	var members []sfMember
	seen := make(map[string]bool)
	for p.pos < len(p.s) {
		if len(members) == maxSFMembers {
			return nil, errSF
		}
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, errSF
		}
		seen[key] = true
		m := sfMember{key: key}
		if p.peek() == '=' {
			p.pos++
			if p.peek() == '(' {
				m.isList = true
				if m.list, m.params, err = p.innerList(); err != nil {
					return nil, err
				}
			} else if m.item, err = p.item(); err != nil {
				return nil, err
			}
		} else {
			m.item = sfItem{kind: sfBool, bool: true}
			if m.item.params, err = p.params(); err != nil {
				return nil, err
			}
		}
		members = append(members, m)
		p.skipOWS()
		if p.pos == len(p.s) {
			return members, nil
		}
		if p.s[p.pos] != ',' {
			return nil, errSF
		}
		p.pos++
		p.skipOWS()
		if p.pos == len(p.s) {
			return nil, errSF // trailing comma
		}
	}
	if len(members) == 0 {
		return nil, errSF
	}
	return members, nil
}

func (p *sfParser) peek() byte {
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *sfParser) skipSP() {
	for p.pos < len(p.s) && p.s[p.pos] == ' ' {
		p.pos++
	}
}

func (p *sfParser) skipOWS() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func (p *sfParser) key() (string, error) {
	start := p.pos
	c := p.peek()
	if !(c >= 'a' && c <= 'z' || c == '*') {
		return "", errSF
	}
	p.pos++
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*' {
			p.pos++
			continue
		}
		break
	}
	if p.pos-start > maxSFKey {
		return "", errSF
	}
	return p.s[start:p.pos], nil
}

func (p *sfParser) innerList() ([]sfItem, []sfParam, error) {
	p.pos++ // '('
	var items []sfItem
	for {
		p.skipSP()
		if p.peek() == ')' {
			p.pos++
			params, err := p.params()
			return items, params, err
		}
		if len(items) == maxSFMembers {
			return nil, nil, errSF
		}
		it, err := p.item()
		if err != nil {
			return nil, nil, err
		}
		items = append(items, it)
		if c := p.peek(); c != ' ' && c != ')' {
			return nil, nil, errSF
		}
	}
}

func (p *sfParser) item() (sfItem, error) {
	it, err := p.bareItem()
	if err != nil {
		return sfItem{}, err
	}
	it.params, err = p.params()
	return it, err
}

func (p *sfParser) params() ([]sfParam, error) {
	var params []sfParam
	for p.peek() == ';' {
		p.pos++
		p.skipSP()
		if len(params) == maxSFParams {
			return nil, errSF
		}
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		for _, q := range params {
			if q.key == key {
				return nil, errSF // a repeated parameter is ambiguous
			}
		}
		val := sfItem{kind: sfBool, bool: true}
		if p.peek() == '=' {
			p.pos++
			if val, err = p.bareItem(); err != nil {
				return nil, err
			}
		}
		params = append(params, sfParam{key: key, val: val})
	}
	return params, nil
}

func (p *sfParser) bareItem() (sfItem, error) {
	c := p.peek()
	switch {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		return p.str()
	case c == ':':
		return p.bytes()
	case c == '?':
		if p.pos+1 < len(p.s) && (p.s[p.pos+1] == '0' || p.s[p.pos+1] == '1') {
			b := p.s[p.pos+1] == '1'
			p.pos += 2
			return sfItem{kind: sfBool, bool: b}, nil
		}
		return sfItem{}, errSF
	case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '*':
		start := p.pos
		p.pos++
		for p.pos < len(p.s) && (isTChar(p.s[p.pos]) || p.s[p.pos] == ':' || p.s[p.pos] == '/') {
			p.pos++
		}
		return sfItem{kind: sfToken, str: p.s[start:p.pos]}, nil
	}
	return sfItem{}, errSF
}

func (p *sfParser) number() (sfItem, error) {
	start := p.pos
	if p.peek() == '-' {
		p.pos++
	}
	digits, frac, dot := 0, 0, false
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		switch {
		case c >= '0' && c <= '9':
			if dot {
				frac++
			} else {
				digits++
			}
		case c == '.' && !dot:
			dot = true
		default:
			goto done
		}
		p.pos++
	}
done:
	text := p.s[start:p.pos]
	if digits == 0 {
		return sfItem{}, errSF
	}
	if !dot {
		if digits > 15 {
			return sfItem{}, errSF
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return sfItem{}, errSF
		}
		return sfItem{kind: sfInteger, num: n}, nil
	}
	if digits > 12 || frac == 0 || frac > 3 {
		return sfItem{}, errSF
	}
	// Canonical form: no trailing zeros in the fraction beyond the first digit.
	intPart, fracPart, _ := strings.Cut(text, ".")
	fracPart = strings.TrimRight(fracPart, "0")
	if fracPart == "" {
		fracPart = "0"
	}
	return sfItem{kind: sfDecimal, str: intPart + "." + fracPart}, nil
}

func (p *sfParser) str() (sfItem, error) {
	p.pos++ // '"'
	var b strings.Builder
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch {
		case c == '\\':
			if p.pos == len(p.s) {
				return sfItem{}, errSF
			}
			n := p.s[p.pos]
			if n != '"' && n != '\\' {
				return sfItem{}, errSF
			}
			b.WriteByte(n)
			p.pos++
		case c == '"':
			return sfItem{kind: sfString, str: b.String()}, nil
		case c < 0x20 || c > 0x7e:
			return sfItem{}, errSF
		default:
			b.WriteByte(c)
		}
		if b.Len() > maxSFString {
			return sfItem{}, errSF
		}
	}
	return sfItem{}, errSF
}

// bytes keeps the raw text of a byte sequence. It accepts the characters of
// both base64 alphabets; the profile's decoder decides which is valid.
func (p *sfParser) bytes() (sfItem, error) {
	p.pos++ // ':'
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == ':' {
			raw := p.s[start:p.pos]
			p.pos++
			return sfItem{kind: sfBytes, str: raw}, nil
		}
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' || c == '-' || c == '_') {
			return sfItem{}, errSF
		}
		p.pos++
	}
	return sfItem{}, errSF
}

// decodeSFBinary decodes the text of a byte sequence in either of its two
// consistent forms: padded standard base64 (RFC 8941), or unpadded
// base64url (AdCP). A text holding "+", "/" or "=" is read as the first and
// must be exactly that; any other text as the second. So a text mixing
// the alphabets ("+" beside "-"), base64url with padding, standard base64
// with "+" or "/" but without its padding, and misplaced or excess padding
// are all refused. Texts in the characters both alphabets share decode the
// same either way.
func decodeSFBinary(s string) ([]byte, error) {
	if strings.ContainsAny(s, "+/=") {
		return decodeStdBase64(s)
	}
	return decodeB64URL(s)
}

func isTChar(c byte) bool {
	if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// serializeInnerList writes an inner list and its parameters in RFC 8941's
// canonical form, which is how @signature-params appears in a signature base.
func serializeInnerList(b *strings.Builder, items []sfItem, params []sfParam) {
	b.WriteByte('(')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(' ')
		}
		serializeBareItem(b, it)
		serializeParams(b, it.params)
	}
	b.WriteByte(')')
	serializeParams(b, params)
}

func serializeParams(b *strings.Builder, params []sfParam) {
	for _, p := range params {
		b.WriteByte(';')
		b.WriteString(p.key)
		if p.val.kind == sfBool && p.val.bool {
			continue
		}
		b.WriteByte('=')
		serializeBareItem(b, p.val)
	}
}

func serializeBareItem(b *strings.Builder, it sfItem) {
	switch it.kind {
	case sfInteger:
		b.WriteString(strconv.FormatInt(it.num, 10))
	case sfDecimal, sfToken:
		b.WriteString(it.str)
	case sfString:
		b.WriteByte('"')
		for i := 0; i < len(it.str); i++ {
			if c := it.str[i]; c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(it.str[i])
		}
		b.WriteByte('"')
	case sfBytes:
		b.WriteByte(':')
		b.WriteString(it.str)
		b.WriteByte(':')
	case sfBool:
		if it.bool {
			b.WriteString("?1")
		} else {
			b.WriteString("?0")
		}
	}
}
