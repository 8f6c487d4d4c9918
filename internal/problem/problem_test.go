package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/courier-go/courier"
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
