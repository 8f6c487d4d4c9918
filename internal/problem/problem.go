// Package problem writes RFC 9457 problem details: the body every courier
// handler answers a refused request with, carrying a stable code.
package problem

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/fieldlist"
)

// ContentType is the media type of a problem body.
const ContentType = "application/problem+json"

// Problem is an RFC 9457 problem details document with courier's code.
// Errors lists the fields a validation failure is about; Write names at
// most fieldlist.Max of them, by paths of at most fieldlist.MaxPathBytes.
type Problem struct {
	Type   string           `json:"type"`
	Title  string           `json:"title"`
	Status int              `json:"status"`
	Code   courier.Code     `json:"code"`
	Detail string           `json:"detail,omitempty"`
	Errors []ack.FieldError `json:"errors,omitempty"`
	// Omitted counts failing fields beyond Errors that whoever made the
	// list found and did not keep, having stopped at fieldlist.Max.
	Omitted int `json:"-"`
}

// New returns a problem for status and code; detail must be content-free.
func New(status int, code courier.Code, detail string) *Problem {
	return &Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Code: code, Detail: detail}
}

// CodeRecorder is implemented by a ResponseWriter that wants to know the
// code of the problem written through it: a handler's metrics hook and
// log line learn it there instead of parsing the body back.
type CodeRecorder interface {
	RecordProblemCode(courier.Code)
}

// Write sends p. Nothing else must have been written to w. The first
// CodeRecorder found on w or down its Unwrap chain is told p's code.
//
// The body names the first fieldlist.Max of p.Errors, each path cut to
// fieldlist.MaxPathBytes (see fieldlist.Cut), and where that leaves some
// out its detail says how many there were ("…; the first 100 of 60000
// failing fields are listed"): the answer stays small whatever a body got
// wrong. p itself is left as it is.
func Write(w http.ResponseWriter, p *Problem) {
	record(w, p.Code)
	b, err := json.Marshal(bounded(p))
	if err != nil { // a Problem always marshals; keep the status regardless
		b = []byte(`{"type":"about:blank","status":500,"code":"internal_error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}

// bounded returns a copy of p whose field list names at most
// fieldlist.Max fields by paths of at most fieldlist.MaxPathBytes: those
// fieldlist.First names, as ack.ValidationError's message does.
func bounded(p *Problem) *Problem {
	q := *p
	var left int
	q.Errors, left = fieldlist.First(p.Errors, func(f *ack.FieldError) *string { return &f.Field })
	if left += p.Omitted; left > 0 {
		q.Detail = fmt.Sprintf("%s; the first %d of %d failing fields are listed", p.Detail, len(q.Errors), len(q.Errors)+left)
	}
	return &q
}

// Error writes a problem for status and code in one call.
func Error(w http.ResponseWriter, status int, code courier.Code, detail string) {
	Write(w, New(status, code, detail))
}

// RetryAfter writes a problem with a Retry-After header, for 429 and 503.
func RetryAfter(w http.ResponseWriter, status int, code courier.Code, detail string, after time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(after.Round(time.Second)/time.Second))))
	Error(w, status, code, detail)
}

// CauseRecorder is implemented by a ResponseWriter that wants to know why
// a failure answered through it happened: a handler's log line gives it.
type CauseRecorder interface {
	RecordProblemCause(error)
}

// NoteCause tells the first CauseRecorder on w or down its Unwrap chain
// err, the cause of the failure about to be answered, and reports whether
// one heard it.
func NoteCause(w http.ResponseWriter, err error) bool {
	r, ok := first[CauseRecorder](w)
	if ok {
		r.RecordProblemCause(err)
	}
	return ok
}

// record tells the first CodeRecorder on w's Unwrap chain that a problem
// with code is being written.
func record(w http.ResponseWriter, code courier.Code) {
	if r, ok := first[CodeRecorder](w); ok {
		r.RecordProblemCode(code)
	}
}

// first returns the first writer on w's Unwrap chain, w included, that is
// an R.
func first[R any](w http.ResponseWriter) (R, bool) {
	for w != nil {
		if r, ok := w.(R); ok {
			return r, true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	var none R
	return none, false
}
