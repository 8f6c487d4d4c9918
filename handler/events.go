package handler

import (
	"encoding/json"
	"net/http"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
)

// outcomeWriter watches a receiver's answer to report it as an Event.
type outcomeWriter struct {
	http.ResponseWriter
	status    int
	code      courier.Code
	duplicate bool
}

func (w *outcomeWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *outcomeWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.code == "" && w.Header().Get("Content-Type") == problem.ContentType {
		var p struct {
			Code courier.Code `json:"code"`
		}
		if json.Unmarshal(b, &p) == nil {
			w.code = p.Code
		}
	}
	return w.ResponseWriter.Write(b)
}

func (w *outcomeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// markDuplicate notes, when w is watched, that the answer is a replay.
func markDuplicate(w http.ResponseWriter) {
	if ow, ok := w.(*outcomeWriter); ok {
		ow.duplicate = true
	}
}

// observe serves r through serve and reports the answer to hook.
func observe(hook func(Event), w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	if hook == nil {
		serve(w, r)
		return
	}
	ow := &outcomeWriter{ResponseWriter: w}
	serve(ow, r)
	e := Event{Status: ow.status, Code: ow.code}
	switch {
	case ow.status >= 500:
		e.Outcome = OutcomeFailed
	case ow.status >= 300:
		e.Outcome = OutcomeRejected
	case ow.duplicate:
		e.Outcome = OutcomeDuplicate
	default:
		e.Outcome = OutcomeAccepted
	}
	hook(e)
}
