package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Environment variables read by PgBouncer.
const (
	envPgBouncer        = "COURIER_PGBOUNCER"         // path of the pgbouncer program
	envPgBouncerRequire = "COURIER_PGBOUNCER_REQUIRE" // fail rather than skip without it
)

// pgBouncerDirPrefix begins the name of a PgBouncer's directory, an
// ownedDir in the system's temporary directory.
const pgBouncerDirPrefix = "courier-pgbouncer-"

// pgBouncerDirs are where distribution packages install pgbouncer, which
// is often not on a user's PATH (Debian's is /usr/sbin/pgbouncer).
var pgBouncerDirs = []string{"/usr/sbin", "/usr/local/sbin"}

// PgBouncer returns the URL of dbURL's database, a database of the server
// this package gives tests (URL), through a PgBouncer of t's own in
// transaction mode (pool_mode = transaction), as many applications run
// PostgreSQL: each transaction, or each statement outside one, runs on
// whichever of its server connections is free, and what a client leaves
// in a session stays on that server connection for the next client.
// PgBouncer holds at most poolSize server connections (default_pool_size)
// to each database, for up to 200 clients, and refuses a client whose URL
// sets a parameter it does not track, such as search_path. pgx's own
// settings in the URL (default_query_exec_mode) are pgx's, and pass. The
// PgBouncer is stopped when t ends, before dbURL's database is dropped,
// and its directory removed; a test process that dies leaves the
// directory until the next PgBouncer started in the same temporary
// directory removes it.
//
// The program is COURIER_PGBOUNCER, or else pgbouncer on PATH or in
// /usr/sbin; running as root, it runs as the "postgres" OS user, since it
// refuses root as PostgreSQL does. Without it t is skipped, or fails when
// COURIER_PGBOUNCER_REQUIRE is 1 or true (as in CI).
func PgBouncer(t testing.TB, dbURL string, poolSize int) string {
	t.Helper()
	bin, err := findPgBouncer()
	if err != nil {
		missing(t, "PgBouncer", envPgBouncerRequire, err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: the database's URL is not a URL")
	}
	cred, err := serverCredential()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	owned, err := makeOwnedDir(os.TempDir(), pgBouncerDirPrefix)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { owned.remove() })
	if cred != nil {
		if err := giveDir(owned.path, cred); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		b, err := launchPgBouncer(ctx, bin, owned, cred, u, port, poolSize)
		if err == nil {
			t.Cleanup(func() {
				// SIGTERM is PgBouncer's immediate shutdown: it closes
				// every connection.
				if err := b.stop("pgbouncer", syscall.SIGTERM); err != nil {
					t.Errorf("pgtest: %v", err)
				}
			})
			pu := *u
			pu.Host = "127.0.0.1:" + strconv.Itoa(port)
			return pu.String()
		}
		if !errors.Is(err, errPortInUse) || attempt == portAttempts {
			t.Fatalf("pgtest: %v", err)
		}
	}
}

// findPgBouncer returns the path of the pgbouncer program.
func findPgBouncer() (string, error) {
	if p := os.Getenv(envPgBouncer); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("%s=%s: %w", envPgBouncer, p, err)
		}
		return path, nil
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, dir := range pgBouncerDirs {
		if p, err := exec.LookPath(filepath.Join(dir, "pgbouncer")); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("pgbouncer not found on PATH or in %s; install it (Debian: apt-get install pgbouncer) or set %s to its path", strings.Join(pgBouncerDirs, ", "), envPgBouncer)
}

// launchPgBouncer starts pgbouncer on port with its files in owned, in
// front of the server of u, and waits until it serves u's database.
func launchPgBouncer(ctx context.Context, bin string, owned *ownedDir, cred *credential, u *url.URL, port, poolSize int) (*server, error) {
	dir := owned.path
	user := u.User.Username()
	password, _ := u.User.Password()
	host, serverPort := u.Hostname(), u.Port()
	if serverPort == "" {
		serverPort = "5432"
	}
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	files := map[string]string{
		// trust: clients are not asked for a password; PgBouncer logs in
		// to the server as the client's user, with the auth file's
		// password when the server asks for one.
		"users.txt": quote(user) + " " + quote(password) + "\n",
		"pgbouncer.ini": strings.Join([]string{
			"[databases]",
			"* = host=" + host + " port=" + serverPort,
			"[pgbouncer]",
			"listen_addr = 127.0.0.1",
			"listen_port = " + strconv.Itoa(port),
			"unix_socket_dir = " + dir,
			"auth_type = trust",
			"auth_file = " + filepath.Join(dir, "users.txt"),
			"pool_mode = transaction",
			"max_client_conn = 200",
			"default_pool_size = " + strconv.Itoa(poolSize),
			"server_tls_sslmode = disable",
			"logfile = " + filepath.Join(dir, "pgbouncer.log"),
			"",
		}, "\n"),
	}
	for name, content := range files {
		// Readable by the OS user PgBouncer runs as; dir, its own and
		// 0700, keeps everyone else out.
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Dir = dir
	cmd.SysProcAttr = procAttr(cred, true, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &server{dir: owned, port: port, cred: cred, cmd: cmd}
	// Ready once it serves the database through its Unix socket, which
	// no other process can have created (see waitReady).
	q := url.Values{"host": {dir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}
	su := url.URL{Scheme: "postgres", User: u.User, Path: u.Path, RawQuery: q.Encode()}
	b.socketURL = su.String()
	if err := b.waitReady(ctx); err != nil {
		stopErr := b.stop("pgbouncer", syscall.SIGTERM)
		log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
		if strings.Contains(string(log), "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return nil, fmt.Errorf("%s: %w\n--- pgbouncer log (tail) ---\n%s", bin, errors.Join(err, stopErr), tail(log))
	}
	return b, nil
}
