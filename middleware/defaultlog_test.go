package middleware_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/middleware"
)

// TestRecoverWithoutALoggerIsHeard: Recover(nil) logs the panic it
// recovers through slog's default logger, at Error. Before, a nil logger
// logged nothing: a panic became a 500 that no log told of.
func TestRecoverWithoutALoggerIsHeard(t *testing.T) {
	logs := logtest.AsDefault(t)
	srv := httptest.NewServer(middleware.Recover(nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
	if got := logs.Messages(slog.LevelError); !slices.Equal(got, []string{"middleware: panic recovered"}) {
		t.Errorf("default logger got %q at Error, want the panic", got)
	}
}

// TestTransactionWithoutRecoverIsHeard: a Transaction with no Recover
// around it logs a transaction it could not begin through slog's default
// logger, at Error. Before, it logged nothing: a 503 with no cause told.
func TestTransactionWithoutRecoverIsHeard(t *testing.T) {
	logs := logtest.AsDefault(t)
	begin := func(context.Context) (*sqlx.Tx, error) { return nil, errors.New("no connection") }
	srv := httptest.NewServer(middleware.Transaction(begin)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the application ran without a transaction")
	})))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	if got := logs.Messages(slog.LevelError); !slices.Equal(got, []string{"middleware: transaction could not begin"}) {
		t.Errorf("default logger got %q at Error, want the failed begin", got)
	}
}
