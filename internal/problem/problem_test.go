package problem_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/fieldlist"
	"github.com/courier-go/courier/internal/problem"
)

// recorder is a CodeRecorder, as a handler's watching writer is.
type recorder struct {
	http.ResponseWriter
	codes []courier.Code
}

func (r *recorder) RecordProblemCode(c courier.Code) { r.codes = append(r.codes, c) }

// wrapper is a middleware's writer that only unwraps.
type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestWriteTellsTheRecorderItsCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
		code  courier.Code
	}{
		{"Error", func(w http.ResponseWriter) { problem.Error(w, 409, courier.CodeIdempotencyCollision, "") }, courier.CodeIdempotencyCollision},
		{"Write", func(w http.ResponseWriter) { problem.Write(w, problem.New(400, courier.CodeValidation, "")) }, courier.CodeValidation},
		{"RetryAfter", func(w http.ResponseWriter) { problem.RetryAfter(w, 503, courier.CodeInProgress, "", time.Second) }, courier.CodeInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			r := &recorder{ResponseWriter: rec}
			tc.write(wrapper{wrapper{r}}) // found down the Unwrap chain
			if len(r.codes) != 1 || r.codes[0] != tc.code {
				t.Fatalf("recorded %v, want %s", r.codes, tc.code)
			}
			var p problem.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != tc.code || rec.Header().Get("Content-Type") != problem.ContentType {
				t.Fatalf("wrote %q (%v)", rec.Body, err)
			}
		})
	}
	// A writer with no recorder on its chain is written to as before.
	rec := httptest.NewRecorder()
	problem.Error(wrapper{rec}, 404, courier.CodeNotFound, "")
	if rec.Code != 404 {
		t.Fatalf("status %d", rec.Code)
	}
}

// TestWriteBoundsTheFieldList: a problem with more failing fields than
// fieldlist.Max names the first of them, says in its detail how many
// there were, and cuts a long path, as a ValidationError's message does;
// the Problem given is left whole.
func TestWriteBoundsTheFieldList(t *testing.T) {
	t.Parallel()
	p := problem.New(400, courier.CodeValidation, "the request is not valid")
	for i := range 60000 {
		p.Errors = append(p.Errors, ack.FieldError{Field: fmt.Sprintf("u%d", i), Rule: "unknown"})
	}
	p.Errors[1].Field = strings.Repeat("k", 900000)
	rec := httptest.NewRecorder()
	problem.Write(rec, p)
	var got problem.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if rec.Body.Len() > 100*(256+64) || len(got.Errors) != fieldlist.Max ||
		got.Errors[0] != p.Errors[0] || got.Errors[1].Field != fieldlist.Cut(p.Errors[1].Field) || got.Errors[99].Field != "u99" ||
		got.Detail != "the request is not valid; the first 100 of 60000 failing fields are listed" {
		t.Fatalf("wrote %d bytes, %d fields, detail %q", rec.Body.Len(), len(got.Errors), got.Detail)
	}
	if len(p.Errors) != 60000 || len(p.Errors[1].Field) != 900000 || p.Detail != "the request is not valid" {
		t.Fatal("Write changed the Problem it was given")
	}
	// A validation error of these fields names in its message the fields
	// the answer lists, in that order and cut alike.
	names := make([]string, len(got.Errors))
	for i, f := range got.Errors {
		names[i] = f.Field + " (" + f.Rule + ")"
	}
	if msg, want := (&ack.ValidationError{Fields: p.Errors}).Error(), "ack: invalid payload: "+strings.Join(names, ", ")+", and 59900 more"; msg != want {
		t.Fatalf("the error says\n%.300s\nthe answer lists\n%.300s", msg, want)
	}
	// A list within the bounds is written as it is.
	p.Errors = p.Errors[2:5]
	rec = httptest.NewRecorder()
	problem.Write(rec, p)
	if want := `"detail":"the request is not valid","errors":[{"field":"u2","rule":"unknown"},{"field":"u3","rule":"unknown"},{"field":"u4","rule":"unknown"}]}`; !strings.HasSuffix(rec.Body.String(), want) {
		t.Fatalf("wrote %s", rec.Body)
	}
}

// TestWriteCountsOmittedFields: a list its maker stopped at fieldlist.Max
// says in its detail how many fields failed in all.
func TestWriteCountsOmittedFields(t *testing.T) {
	t.Parallel()
	p := problem.New(400, courier.CodeValidation, "the request is not valid")
	p.Errors = []ack.FieldError{{Field: "u0", Rule: "unknown"}, {Field: "u1", Rule: "unknown"}}
	p.Omitted = 59998
	rec := httptest.NewRecorder()
	problem.Write(rec, p)
	if want := `"detail":"the request is not valid; the first 2 of 60000 failing fields are listed","errors":[{"field":"u0","rule":"unknown"},{"field":"u1","rule":"unknown"}]}`; !strings.HasSuffix(rec.Body.String(), want) {
		t.Fatalf("wrote %s", rec.Body)
	}
}
