package pgtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The statements that make and copy a template database. Identifiers are
// quoted with pgx.Identifier before they are substituted for %s.
const (
	// copyDatabaseSQL copies the template with its locale and collation.
	// Nobody may be connected to the template meanwhile: closeTemplateSQL
	// keeps everyone out once it is prepared.
	copyDatabaseSQL  = `CREATE DATABASE %s TEMPLATE %s`
	closeTemplateSQL = `ALTER DATABASE %s WITH ALLOW_CONNECTIONS false`
)

// A Template is a database prepared once per test process, on first use,
// and copied for each test that asks for a database of its kind: a test
// whose every database must first be migrated gets a copy of one migrated
// database, which costs the server a file copy rather than the
// migration's statements each time. Each copy is a fresh database of the
// test's own, as from URL; the template is dropped by Run.
type Template struct {
	prepare func(ctx context.Context, dbURL string) error

	mu       sync.Mutex
	prepared bool
	adminURL string // of the server holding the template
	name     string // the template database, when err is nil
	err      error  // why there is no template
}

// NewTemplate returns a Template that prepare makes: it is given the URL
// of a fresh, empty database, leaves in it what every copy starts with,
// and closes its connections to it before it returns.
func NewTemplate(prepare func(ctx context.Context, dbURL string) error) *Template {
	return &Template{prepare: prepare}
}

// URL is like the package's URL, for a database that starts as a copy of
// the template: it prepares the template on its first call, and fails t
// if that fails.
func (tp *Template) URL(t testing.TB) string {
	t.Helper()
	adminURL := Server(t)
	template, err := tp.make(adminURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	name, dbURL, err := copyDatabase(ctx, adminURL, template)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dropWithCleanup(t, adminURL, name)
	return dbURL
}

// make returns the name of the template on the server at adminURL,
// preparing it on the first call.
func (tp *Template) make(adminURL string) (string, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.prepared && tp.adminURL == adminURL {
		return tp.name, tp.err
	}
	tp.prepared, tp.adminURL = true, adminURL
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tp.name, tp.err = makeTemplate(ctx, adminURL, tp.prepare)
	return tp.name, tp.err
}

// makeTemplate creates an empty database on the server at adminURL, has
// prepare fill it, keeps everyone out of it from then on, and registers
// it to be dropped by Run.
func makeTemplate(ctx context.Context, adminURL string, prepare func(context.Context, string) error) (string, error) {
	name, dbURL, err := createDatabase(ctx, adminURL)
	if err != nil {
		return "", err
	}
	err = prepare(ctx, dbURL)
	if err == nil {
		err = execAdmin(ctx, adminURL, closeTemplateSQL, name)
	}
	if err != nil {
		_ = dropDatabase(context.WithoutCancel(ctx), adminURL, name)
		return "", fmt.Errorf("preparing a template database: %w", err)
	}
	harness.mu.Lock()
	harness.templates = append(harness.templates, template{adminURL: adminURL, name: name})
	harness.mu.Unlock()
	return name, nil
}

// copyDatabase creates a database with a unique name on the server at
// adminURL as a copy of the database template, and returns its name and
// URL.
func copyDatabase(ctx context.Context, adminURL, template string) (name, dbURL string, err error) {
	name = newDatabaseName()
	dbURL, err = databaseURL(adminURL, name)
	if err != nil {
		return "", "", err
	}
	if err := execAdmin(ctx, adminURL, copyDatabaseSQL, name, template); err != nil {
		return "", "", fmt.Errorf("creating database %s from %s: %w", name, template, err)
	}
	return name, dbURL, nil
}

// execAdmin runs query, with the quoted identifiers of names substituted
// for its %s, on the admin connection of the server at adminURL.
func execAdmin(ctx context.Context, adminURL, query string, names ...string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to the admin database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	idents := make([]any, len(names))
	for i, n := range names {
		idents[i] = pgx.Identifier{n}.Sanitize()
	}
	_, err = conn.Exec(ctx, fmt.Sprintf(query, idents...))
	return err
}
