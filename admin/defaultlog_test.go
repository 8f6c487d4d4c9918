package admin

import (
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logtest"
)

// TestAdminWithoutALoggerIsHeardWhenTheStoreFails: an Admin given no
// Logger logs through slog's default logger, from Warn up: the database
// it could not reach (Warn) is heard with no setup, a mutation (Info) is
// not. Before, both went nowhere.
func TestAdminWithoutALoggerIsHeardWhenTheStoreFails(t *testing.T) {
	logs := logtest.AsDefault(t)
	b := setupAdmin(t, allowAll)
	id := b.enqueue(t, "n-1", hookA)
	if resp, body := b.do(t, "POST", "/api/deliveries/"+strconv.FormatInt(id, 10)+"/cancel", "", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}
	if got := logs.All(); len(got) != 0 {
		t.Fatalf("a mutation reached the default logger: %v", got)
	}
	if err := b.store.DB().Close(); err != nil {
		t.Fatal(err)
	}
	resp, body := b.do(t, "GET", "/api/health", "", nil)
	refused(t, resp, body, http.StatusServiceUnavailable, courier.CodeDatabaseUnavailable)
	if got := logs.Messages(slog.LevelWarn); !slices.Equal(got, []string{"admin: database unavailable"}) {
		t.Errorf("default logger got %q from Warn up, want the database unavailable", got)
	}
}
