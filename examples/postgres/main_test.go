package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/testmain"

	"github.com/courier-go/courier/internal/pgtest"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// TestRun runs the example twice on one database: the second run delivers
// its own notifications and is not confused by the first's.
func TestRun(t *testing.T) {
	url := pgtest.URL(t)
	for i := range 2 {
		var out bytes.Buffer
		ok, err := run(t.Context(), options{url: url, addr: "127.0.0.1:0", n: 300, batch: 40, timeout: time.Minute}, &out)
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		if !ok || !strings.Contains(out.String(), "verdict: OK") {
			t.Fatalf("run %d did not succeed:\n%s", i, out.String())
		}
		t.Logf("run %d:\n%s", i, out.String())
	}
}

// TestURLPasswordNotFromFlag: -url was the way to pass the database, with
// its password on the command line, where ps shows it to every user of the
// machine. A password is taken from $COURIER_PG_URL only.
func TestURLPasswordNotFromFlag(t *testing.T) {
	for _, tc := range []struct {
		flag, env, want string
		refused         bool
	}{
		{flag: "postgres://app:s3cret@db:5432/scratch", refused: true},
		{flag: "postgresql://app@db/scratch?sslmode=disable&password=s3cret", refused: true},
		{flag: "host=db user=app password=s3cret dbname=scratch", refused: true},
		{flag: "postgres://app@db/scratch", env: "postgres://app:s3cret@db/other", want: "postgres://app@db/scratch"},
		{env: "postgres://app:s3cret@db/scratch", want: "postgres://app:s3cret@db/scratch"},
		{refused: true},
	} {
		got, err := databaseURL(tc.flag, tc.env)
		if refused := err != nil; refused != tc.refused || got != tc.want {
			t.Errorf("databaseURL(%q, %q) = %q, %v; want %q, refused %v", tc.flag, tc.env, got, err, tc.want, tc.refused)
		}
	}
}
