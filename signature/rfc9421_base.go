package signature

import (
	"errors"
	"net/http"
	"strings"
)

// This file builds RFC 9421 §2.5 signature bases. It is written for the
// AdCP profile but follows the RFC for the components it supports, which is
// how the RFC's own examples (Appendix B.2.5, B.2.6) test it.

// baseRequest is what a signature base is built from.
type baseRequest struct {
	method    string
	target    string // canonical @target-uri
	authority string // canonical @authority
	header    http.Header
}

var (
	errComponentUnsupported = errors.New("covered component is not supported")
	errComponentAbsent      = errors.New("covered header field is absent")
	errComponentRepeated    = errors.New("covered header field has several lines")
)

// singleLineFields are header fields a covered request must carry on one
// line: a second Content-Type or Content-Digest line would let two parsers
// disagree about what was signed.
var singleLineFields = map[string]bool{"content-type": true, "content-digest": true}

// componentValue returns the value of one covered component.
func (r baseRequest) componentValue(name string) (string, error) {
	if strings.HasPrefix(name, "@") {
		scheme, rest, _ := strings.Cut(r.target, "://")
		pathQuery, ok := strings.CutPrefix(rest, r.authority)
		if !ok || r.authority == "" {
			return "", errComponentUnsupported
		}
		path, query, hasQuery := strings.Cut(pathQuery, "?")
		switch name {
		case "@method":
			return r.method, nil
		case "@target-uri":
			return r.target, nil
		case "@authority":
			return r.authority, nil
		case "@scheme":
			return scheme, nil
		case "@request-target":
			return pathQuery, nil
		case "@path":
			return path, nil
		case "@query":
			if !hasQuery {
				return "?", nil
			}
			return "?" + query, nil
		}
		return "", errComponentUnsupported
	}
	if name == "" || name != strings.ToLower(name) {
		return "", errComponentUnsupported
	}
	for i := 0; i < len(name); i++ {
		if !isTChar(name[i]) {
			return "", errComponentUnsupported
		}
	}
	lines := r.header.Values(name)
	switch {
	case len(lines) == 0:
		return "", errComponentAbsent
	case len(lines) > 1 && singleLineFields[name]:
		return "", errComponentRepeated
	}
	vals := make([]string, len(lines))
	for i, l := range lines {
		vals[i] = strings.Trim(l, " \t")
	}
	v := strings.Join(vals, ", ")
	if strings.ContainsAny(v, "\r\n") {
		return "", errComponentUnsupported
	}
	return v, nil
}

// signatureBase builds the base for the covered components (names without
// parameters) and the serialized @signature-params value.
func signatureBase(components []string, sigParams string, r baseRequest) (string, error) {
	var b strings.Builder
	for _, c := range components {
		v, err := r.componentValue(c)
		if err != nil {
			return "", err
		}
		b.WriteByte('"')
		b.WriteString(c)
		b.WriteString(`": `)
		b.WriteString(v)
		b.WriteByte('\n')
	}
	b.WriteString(`"@signature-params": `)
	b.WriteString(sigParams)
	return b.String(), nil
}
