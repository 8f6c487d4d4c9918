package admin

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier"
)

// TestRefusedMutationLogNamesTheAction: Config.Logger's line for a refused
// mutation names the action asked for and what it named in its path, as
// every other line does: a run of refusals is otherwise "mutation refused"
// alone, and an operator reading the log cannot tell a refused cancel of
// one delivery from a refused redrive of every endpoint.
func TestRefusedMutationLogNamesTheAction(t *testing.T) {
	var logs bytes.Buffer
	b := setupAdminConfig(t, Config{
		Authorize: func(*http.Request) error { return courier.CodeForbidden },
		Logger:    slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	id := b.failed(t, "n-1", hookA)
	for path, route := range map[string]string{
		"/api/deliveries/" + strconv.FormatInt(id, 10) + "/cancel": "/api/deliveries/{id}/cancel",
		"/api/endpoints/" + refA + "/disable":                      "/api/endpoints/{ref}/disable",
		"/api/redrive":                                             "/api/redrive",
	} {
		logs.Reset()
		req, _ := http.NewRequest(http.MethodPost, b.server.URL+adminPrefix+path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("POST %s: %d, want 403", path, resp.StatusCode)
		}
		var line map[string]any
		if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
			t.Fatalf("POST %s: log %q: %v", path, logs.String(), err)
		}
		if line["action"] != route {
			t.Errorf("POST %s: refusal logged %s, want action %s", path, logs.String(), route)
		}
		switch {
		case strings.Contains(path, "/deliveries/") && line["id"] != float64(id):
			t.Errorf("POST %s: refusal logged %s, want id %d", path, logs.String(), id)
		case strings.Contains(path, "/endpoints/") && line["endpoint_ref"] != refA:
			t.Errorf("POST %s: refusal logged %s, want endpoint_ref %s", path, logs.String(), refA)
		}
	}
}

// TestRedriveLogNamesWhatItRedrove: the line of a redrive names the
// delivery it was for only when it was for one: a redrive of every
// endpoint's deliveries logged id 0, as if for a delivery of that id.
func TestRedriveLogNamesWhatItRedrove(t *testing.T) {
	var logs bytes.Buffer
	b := setupAdminConfig(t, Config{Authorize: allowAll, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	id := b.failed(t, "n-1", hookA)
	b.failed(t, "n-2", hookB)
	for _, c := range []struct {
		path  string
		id    any // nil: not logged
		count float64
	}{
		{"/api/deliveries/" + strconv.FormatInt(id, 10) + "/redrive", float64(id), 1},
		{"/api/redrive", nil, 1},
	} {
		logs.Reset()
		req, _ := http.NewRequest(http.MethodPost, b.server.URL+adminPrefix+c.path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var line map[string]any
		if resp.StatusCode != http.StatusOK || json.Unmarshal(logs.Bytes(), &line) != nil {
			t.Fatalf("POST %s: %d, log %q", c.path, resp.StatusCode, logs.String())
		}
		if line["msg"] != "admin: redrive" || line["id"] != c.id || line["count"] != c.count {
			t.Errorf("POST %s: logged %s, want admin: redrive with id %v, count %v", c.path, logs.String(), c.id, c.count)
		}
	}
}

// TestStoreFailureLogNamesTheAction: Config.Logger says a line names the
// action and what it acted on; a mutation the store failed logged
// "admin: database unavailable" with its code and error alone, as the
// refusal's line did before it named them. It now names the route and
// the delivery id its path names.
func TestStoreFailureLogNamesTheAction(t *testing.T) {
	var logs bytes.Buffer
	b := setupAdminConfig(t, Config{Authorize: allowAll, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	id := b.failed(t, "n-1", hookA)
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	path := "/api/deliveries/" + strconv.FormatInt(id, 10) + "/cancel"
	logs.Reset()
	req, _ := http.NewRequest(http.MethodPost, b.server.URL+adminPrefix+path, nil)
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var line map[string]any
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(logs.Bytes(), &line) != nil {
		t.Fatalf("POST %s on a closed store: %d, log %q", path, resp.StatusCode, logs.String())
	}
	if line["action"] != "/api/deliveries/{id}/cancel" || line["id"] != float64(id) {
		t.Errorf("POST %s on a closed store logged %s, want action /api/deliveries/{id}/cancel and id %d", path, logs.String(), id)
	}
}
