package handler

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logtest"
)

// TestAnswersToComeBackLaterAreNotLoggedAsFailures: of the 503s, what
// tells the sender to come back later is not a failure of the store or
// the application: in_progress (another request is processing the
// notification, as concurrent redeliveries do in the course of things)
// is logged at Info, and so is server_busy (the bodies in flight at their
// budget: load shed, which any client can bring about: see
// TestServerBusyIsNotHeardWithoutALogger). What failed stays at Error.
func TestAnswersToComeBackLaterAreNotLoggedAsFailures(t *testing.T) {
	for _, tt := range []struct {
		code  courier.Code
		level slog.Level
	}{
		{courier.CodeInProgress, slog.LevelInfo},
		{courier.CodeServerBusy, slog.LevelInfo},
		{courier.CodeInternal, slog.LevelError},
		{courier.CodeHandlerFailed, slog.LevelError},
	} {
		var logs logtest.Records
		f := front{logger: slog.New(&logs)}
		status := http.StatusServiceUnavailable
		if tt.code == courier.CodeHandlerFailed {
			status = http.StatusInternalServerError
		}
		ow := &outcomeWriter{ResponseWriter: httptest.NewRecorder(), status: status, code: tt.code}
		f.log(httptest.NewRequest(http.MethodPost, "/", nil), ow, ow.event())
		var got []string
		for _, r := range logs.All() {
			got = append(got, r.Level.String()+" "+r.Message)
		}
		if len(got) != 1 || logs.All()[0].Level != tt.level {
			t.Errorf("%d %s: logged %q, want one line at %v", status, tt.code, got, tt.level)
		}
	}
}
