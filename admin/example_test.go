package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/admin"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// Mount the ops page and JSON API under a prefix, behind the
// application's own authentication; changes (redrive, cancel,
// enable/disable) go through Authorize as well.
func ExampleNewHandler() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	h, err := admin.NewHandler(admin.Config{
		Store: s,
		Authorize: func(r *http.Request) error {
			if r.Header.Get("X-Operator") == "" { // the application's own check
				return fmt.Errorf("%w: operators only", courier.CodeForbidden)
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/courier/", http.StripPrefix("/ops/courier", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/ops/courier/api/health")
	if err != nil {
		panic(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), len(body) > 0)
	resp, err = http.Post(srv.URL+"/ops/courier/api/redrive", "application/json", nil)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// 200 application/json true
	// 403
}
