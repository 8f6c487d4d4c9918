package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestAWALRemovedUnderTheStoreStopsItsWrites: the -wal file removed under
// an open Store (by hand, by a cleanup job) leaves SQLite committing into
// the unlinked file, without an error: what it held and what commits after
// it, enqueues and a receiver's Acks, is in no file on disk, and a crash
// loses it. The writer notices within a few commits, copies what the
// unlinked file holds into the database file, and refuses every write
// from then on, database_unavailable, until the Store is opened again:
// each enqueue that succeeded is in the database file alone, none is
// lost, and the Store opened again writes as before.
func TestAWALRemovedUnderTheStoreStopsItsWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	enqueue := func(id string) error {
		tx, err := s.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
			return err
		}
		return tx.Commit()
	}
	if err := enqueue("before"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	committed := 1
	var refused error
	for i := range 200 {
		if refused = enqueue(fmt.Sprintf("after-%d", i)); refused != nil {
			break
		}
		committed++
	}
	if courier.CodeOf(refused) != courier.CodeDatabaseUnavailable {
		t.Errorf("with the -wal file removed, %d enqueues committed and then %v; want them refused, database_unavailable", committed, refused)
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
	db, err := sqlx.Open("sqlite3", crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.GetContext(ctx, &n, "SELECT count(*) FROM courier_outbox"); err != nil || n != committed {
		t.Errorf("the database file alone holds %d deliveries (%v), want the %d enqueues that committed", n, err, committed)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = sqlite.Open(ctx, path, store.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := enqueue("reopened"); err != nil {
		t.Fatalf("an enqueue once the Store is opened again: %v", err)
	}
	if err := s.DB().GetContext(ctx, &n, "SELECT count(*) FROM courier_outbox"); err != nil || n != committed+1 {
		t.Errorf("the Store opened again holds %d deliveries (%v), want %d", n, err, committed+1)
	}
}

// TestCheckSaysTheWALWasRemoved: an operator's Check, run right after the
// -wal file was removed under the open Store, says the database is lost
// (blocked, database_corrupt, as for the database file itself), before
// the writer has come to notice it at its own look, some commits later;
// the writer refuses writes from then on.
func TestCheckSaysTheWALWasRemoved(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := storeWithOne(t, "n-1")
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	h, err := s.Outbox.Check(ctx, 0)
	if err != nil || h.Status != store.HealthBlocked || h.Code != courier.CodeDatabaseCorrupt {
		t.Errorf("Check with the -wal file removed = %s %s, %v; want blocked, database_corrupt", h.Status, h.Code, err)
	}
	tx, err := s.Begin(ctx)
	if err == nil {
		defer tx.Rollback()
		_, err = s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-2", Endpoint: "https://r.example/h", Payload: []byte(`{}`)})
	}
	if courier.CodeOf(err) != courier.CodeDatabaseUnavailable {
		t.Errorf("an enqueue after Check found the -wal file removed = %v, want refused, database_unavailable", err)
	}
}

// TestCheckInItsOwnTransactionDoesNotWaitForItself: Check looks at the
// -wal file through the writer; called by a goroutine whose own
// transaction holds the writer (an application's Store.Begin with a write
// pending), it waited for itself until its context ended. It waits a
// moment only, and reports the rest.
func TestCheckInItsOwnTransactionDoesNotWaitForItself(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := storeWithOne(t, "n-1")
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-2", Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err := s.Outbox.Check(cctx, 0)
	if err != nil || h.Status != store.HealthOK {
		t.Fatalf("Check inside the caller's own write transaction = %s %s, %v; want ok, without waiting for the writer it holds", h.Status, h.Code, err)
	}
}

// TestHealthSaysTheDatabaseIsLostAsCheckDoes: Health, which an operator's
// probe polls (admin, promcourier), read only counts and said ok while
// the database file, or its -wal file, was removed or replaced under the
// open Store, whose commits then go to no file on disk and whose writer
// refuses every write once it notices: only Check said so. Health says it
// too, blocked database_corrupt, from a look at the files that neither
// takes nor waits for the writer.
func TestHealthSaysTheDatabaseIsLostAsCheckDoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, path string)
	}{
		{"the -wal file removed", func(t *testing.T, path string) {
			if err := os.Remove(path + "-wal"); err != nil {
				t.Fatal(err)
			}
		}},
		{"the -wal file replaced", func(t *testing.T, path string) {
			if err := os.Remove(path + "-wal"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+"-wal", nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"the database file removed", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
		{"the database file replaced", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s, path := storeWithOne(t, "n-1")
			if h, err := s.Outbox.Health(ctx); err != nil || h.Status != store.HealthOK {
				t.Fatalf("Health of the file the Store opened = %s %s, %v", h.Status, h.Code, err)
			}
			tc.lose(t, path)
			h, err := s.Outbox.Health(ctx)
			if err != nil || h.Status != store.HealthBlocked || h.Code != courier.CodeDatabaseCorrupt {
				t.Errorf("Health with %s = %s %s, %v; want blocked, database_corrupt, as Check says", tc.name, h.Status, h.Code, err)
			}
			if c, err := s.Outbox.Check(ctx, 0); err != nil || c.Code != h.Code {
				t.Errorf("Check with %s = %s %s, %v; Health said %s", tc.name, c.Status, c.Code, err, h.Code)
			}
			if h, err := s.Outbox.Health(ctx); err != nil || h.Code != courier.CodeDatabaseCorrupt {
				t.Errorf("Health after Check with %s = %s %s, %v; want database_corrupt still", tc.name, h.Status, h.Code, err)
			}
		})
	}
}
