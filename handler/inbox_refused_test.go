package handler_test

import (
	"net/http"
	"testing"

	"github.com/courier-go/courier"
)

// TestInboxWriteRefusedByTheDatabase: a rule of the database's own (an
// application's trigger on courier's inbox: PostgreSQL's RAISE EXCEPTION
// without an errcode, P0001, and SQLite's RAISE(ABORT)) refuses the
// receiver's inbox write. That is no fault of the request, which a courier
// sender would fail for good on a 4xx: the receiver answers 503
// internal_error, as for any store failure, and processes the sender's
// retry once the rule lets the write through.
func TestInboxWriteRefusedByTheDatabase(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			b := setupReporting(t, reportingOptions{postgres: engine == "postgres"})
			create, drop := `CREATE TRIGGER refuse_inbox BEFORE INSERT ON courier_inbox
				BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`, `DROP TRIGGER refuse_inbox`
			if engine == "postgres" {
				create = `
					CREATE FUNCTION refuse_inbox() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN
						RAISE EXCEPTION 'the database refuses the write';
					END $$;
					CREATE TRIGGER refuse_inbox BEFORE INSERT ON courier_inbox FOR EACH ROW EXECUTE FUNCTION refuse_inbox();`
				drop = `DROP TRIGGER refuse_inbox ON courier_inbox`
			}
			if _, err := b.store.DB().Exec(create); err != nil {
				t.Fatal(err)
			}
			report := deliveryReport(t)
			resp, out := b.post(t, report)
			wantProblem(t, resp, out, http.StatusServiceUnavailable, courier.CodeInternal)
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("a refused inbox write was answered without Retry-After")
			}
			if _, err := b.store.DB().Exec(drop); err != nil {
				t.Fatal(err)
			}
			b.postOK(t, report)
			if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 1 {
				t.Fatalf("%d inbox records, %d effects, %d calls", inbox, effects, b.calls.Load())
			}
		})
	}
}
