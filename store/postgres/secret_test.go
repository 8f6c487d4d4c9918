package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// TestConnectionStringPasswordNeverInErrors: a pool whose connection
// string pgx cannot parse fails Migrate and Open, database_unavailable,
// and their errors (which applications log) hold none of the string's
// password, whatever bytes it holds: pgx quotes the string, and its
// redaction misses what follows a password's unescaped @.
func TestConnectionStringPasswordNeverInErrors(t *testing.T) {
	const secret = "ZZSECRETZZ"
	for _, dsn := range []string{
		"postgres://app:pw@" + secret + "@127.0.0.1:5432/app?sslmode=bogus",
		"postgres://app:" + secret + "@127.0.0.1:5432/app?sslmode=bogus",
		"postgres://app@127.0.0.1:5432/app?password=" + secret + "&sslmode=bogus",
		"host=127.0.0.1 password=" + secret + " sslrootcert=/nonexistent/ca.pem sslmode=verify-full",
	} {
		db, err := sqlx.Open(postgres.DriverName, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		hide := strings.NewReplacer(secret, "[SECRET]") // not even a test's password in a log
		check := func(what string, err error) {
			t.Helper()
			if err == nil || strings.Contains(err.Error(), secret) || courier.CodeOf(err) != courier.CodeDatabaseUnavailable {
				t.Errorf("%s over %q: %s, want database_unavailable without the password", what, hide.Replace(dsn), hide.Replace(fmt.Sprint(err)))
			}
		}
		check("Migrate", store.Migrate(t.Context(), db))
		_, err = store.Open(t.Context(), db, store.Config{})
		check("Open", err)
	}
}
