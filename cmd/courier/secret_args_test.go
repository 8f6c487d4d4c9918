package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
)

// TestAConnectionStringOutOfPlaceIsNeverQuoted: a connection string given
// where a command does not take it, -db left out before it or a
// keyword/value string left unquoted so that its words came apart, was
// quoted whole in the usage error, password and all: "unexpected argument
// \"postgres://app:s3cret@…\"", "unknown command …", "… is not a delivery
// id". It is a usage error that does not show the word, and the command
// does nothing.
func TestAConnectionStringOutOfPlaceIsNeverQuoted(t *testing.T) {
	t.Parallel()
	db, s := migrated(t)
	enqueue(t, s, "n-1", "https://r.example/hooks")
	pgURL := withPassword(t, couriertest.PostgresURL(t), "s3cret")
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"health", pgURL}, "unexpected argument"},                                                     // -db left out
		{[]string{"migrate", "-db", "host=127.0.0.1", "password=s3cret", "dbname=app"}, "unexpected argument"}, // unquoted
		{[]string{"prune", "-db", "dbname=app", "sslpassword=s3cret", "-older-than", "1us"}, "unexpected argument"},
		{[]string{"deliveries", "cancel", "-db", db, pgURL}, "not a delivery id"},
		{[]string{"deliveries", "redrive", "-db", db, "1", "POSTGRESQL://app:s3cret@db.internal/app"}, "unexpected argument"},
		{[]string{"deliveries", pgURL}, "unknown action"},
		{[]string{"endpoints", "list", "-db", db, "user=app password=s3cret"}, "unexpected argument"},
		{[]string{"contracts", "list", "-db", "host=127.0.0.1", "password=s3cret"}, "unexpected argument"},
		{[]string{"endpoints", "enable", "-db", db, "https://r.example/hooks", "https://app:s3cret@r.example/hooks"}, "unexpected argument"},
		{[]string{pgURL, "health"}, "unknown command"},
	} {
		code, out, errOut := courierRun(t, tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.says) || strings.Contains(errOut, "s3cret") {
			hide := strings.NewReplacer("s3cret", "[PASSWORD]") // not even a test's password in a log
			t.Errorf("courier %s: exit %d, stdout %q, stderr %q; want %d saying %q, without the password",
				hide.Replace(strings.Join(tc.args, " ")), code, out, hide.Replace(errOut), exitUsage, tc.says)
		}
	}
	if d, err := s.Outbox.Get(t.Context(), 1); err != nil || d.Status != courier.StatusPending {
		t.Errorf("the delivery after the refused commands: %s, %v; want it pending still", d.Status, err)
	}
}

// withPassword returns the PostgreSQL URL raw with password as its user's
// password.
func withPassword(t *testing.T, raw, password string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), password)
	return u.String()
}

// TestASQLiteURIIsNoFilePath: -db is a SQLite file path; given a SQLite
// URI or a go-sqlite3 DSN with its parameters (file:app.db?_auth_pass=…),
// migrate created a new, empty database whose file name was the whole
// string, password and all, said "migrated" and exited 0, leaving app.db
// as it was, and every other command sent the operator to migrate ("no
// such file (courier migrate creates it)"). Each is a usage error that
// does not quote it, and no file is made.
func TestASQLiteURIIsNoFilePath(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd) // where a file named after -db would appear
	mustRun(t, exitOK, "migrate", "-db", "app.db")
	for _, db := range []string{
		"file:app.db?_auth=1&_auth_user=admin&_auth_pass=s3cret",
		"FILE:app.db",
		"app.db?_key=s3cret",
		"app.db?_auth_pass=s3cret&_busy_timeout=5000",
	} {
		for _, cmd := range [][]string{{"migrate"}, {"health"}, {"prune"}, {"deliveries", "list"}} {
			code, out, errOut := courierRun(t, append(cmd, "-db", db)...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, "-db is a SQLite file path") || strings.Contains(errOut, "s3cret") {
				hide := strings.NewReplacer("s3cret", "[PASSWORD]")
				t.Errorf("courier %s -db %s: exit %d, stdout %q, stderr %q; want %d saying -db is a file path, without the password",
					cmd[0], hide.Replace(db), code, out, hide.Replace(errOut), exitUsage)
			}
		}
	}
	if entries, _ := os.ReadDir(wd); len(entries) != 1 || entries[0].Name() != "app.db" {
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = strings.ReplaceAll(e.Name(), "s3cret", "[PASSWORD]")
		}
		t.Errorf("the working directory holds %q, want app.db alone", names)
	}
}

// TestAFileTheConnectionStringNamesIsSaid: a PostgreSQL connection string
// that parses but names a file that cannot be read (sslrootcert, the CA
// certificate, after a rotation moved it) failed as "the pool's connection
// string cannot be parsed", which sent the operator to the string. It
// names the file and why, and still not the password.
func TestAFileTheConnectionStringNamesIsSaid(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(withPassword(t, couriertest.PostgresURL(t), "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "rotated-ca.pem")
	q := u.Query()
	q.Set("sslmode", "verify-full")
	q.Set("sslrootcert", ca)
	u.RawQuery = q.Encode()
	for _, cmd := range [][]string{{"migrate"}, {"health"}, {"deliveries", "list"}} {
		code, out, errOut := courierRun(t, append(cmd, "-db", u.String())...)
		if code != exitFailed || out != "" || !strings.Contains(errOut, ca+": no such file or directory") || strings.Contains(errOut, "s3cret") {
			t.Errorf("courier %s with a CA file that is not there: exit %d, stdout %q, stderr %q; want %d naming the file, without the password",
				cmd[0], code, out, strings.ReplaceAll(errOut, "s3cret", "[PASSWORD]"), exitFailed)
		}
	}
}

// TestAPasswordCutShortInAURLIsNeverShown: a PostgreSQL URL whose
// password holds an @ and a / not percent-encoded parses as another URL:
// what comes before the / is the host, what follows it the database name,
// and pgx's connection error quotes both ("failed to connect to
// `user=app database=s3cret@db.internal/app`"), half the password each.
// An @ after the URL's host is a usage error that quotes nothing and says
// to percent-encode the password.
func TestAPasswordCutShortInAURLIsNeverShown(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(couriertest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	db := "postgres://" + u.User.Username() + ":p@localhost/s3cret@" + u.Host + u.Path + "?" + u.RawQuery // password p@localhost/s3cret
	for _, cmd := range [][]string{{"migrate"}, {"health"}, {"deliveries", "list"}} {
		code, out, errOut := courierRun(t, append(cmd, "-db", db)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "percent-encode") || strings.Contains(errOut, "s3cret") {
			t.Errorf("courier %s -db with a password cut short: exit %d, stdout %q, stderr %q; want %d saying to percent-encode it, without the password",
				cmd[0], code, out, strings.ReplaceAll(errOut, "s3cret", "[PASSWORD]"), exitUsage)
		}
	}
}
