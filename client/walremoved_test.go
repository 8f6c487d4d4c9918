package client_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestAReceiverWhoseWALIsRemovedAnswersRetryLater: the inbox's -wal file
// is removed under the receiver's open Store. Within a few requests the
// receiver stops answering 200 for what it could only record in the
// unlinked file, lost at a crash, and answers 503 with Retry-After
// instead; every notification it answered 200 is in its database file
// alone, and the sender's worker keeps retrying what it refused rather
// than give it up.
func TestAReceiverWhoseWALIsRemovedAnswersRetryLater(t *testing.T) {
	f := setupFullDisks(t, nil)
	f.run(t)
	if err := f.enqueue(t.Context(), "warm", 0); err != nil {
		t.Fatal(err)
	}
	f.await(t, "warm delivered", func(e client.Event) bool { return e.Status == courier.StatusSucceeded })

	path := inboxPath(t, f.inbox)
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	accepted := map[string]bool{"warm": true}
	refused := ""
	for i := range 200 {
		id := fmt.Sprintf("direct-%03d", i)
		status, retry, code := f.post(t, id)
		if status == http.StatusOK {
			accepted[id] = true
			continue
		}
		if status != http.StatusServiceUnavailable || retry == "" || code != string(courier.CodeInternal) {
			t.Fatalf("%s answered %d, Retry-After %q, code %q; want 503 with Retry-After, internal_error", id, status, retry, code)
		}
		refused = id
		break
	}
	if refused == "" {
		t.Fatalf("with its -wal file removed the receiver answered %d requests 200, none 503", len(accepted)-1)
	}
	if err := f.enqueue(t.Context(), "sent", 0); err != nil {
		t.Fatal(err)
	}
	if e := f.await(t, "sent refused", func(e client.Event) bool { return e.NotificationID == "sent" }); e.Status != courier.StatusRetryWait {
		t.Errorf("the delivery to the receiver whose -wal file is gone: %+v, want a retry", e)
	}

	// What a crash would leave: the database file alone.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	if err := os.WriteFile(crashed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(t.Context(), crashed, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []string
	if err := s.DB().SelectContext(t.Context(), &ids, `SELECT id FROM applied`); err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, id := range ids {
		kept[id] = true
	}
	for id := range accepted {
		if !kept[id] {
			t.Errorf("%s was answered 200 and is not in the database file", id)
		}
	}
	if len(ids) != len(accepted) {
		t.Errorf("the database file holds %d applied, want the %d answered 200", len(ids), len(accepted))
	}
}

// inboxPath is the path of s's database file.
func inboxPath(t *testing.T, s *store.Store) string {
	t.Helper()
	var path string
	if err := s.DB().GetContext(t.Context(), &path, "SELECT file FROM pragma_database_list WHERE name = 'main'"); err != nil {
		t.Fatal(err)
	}
	return path
}
