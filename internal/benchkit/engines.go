package benchkit

import (
	"context"
	"fmt"
	"os"

	"github.com/courier-go/courier/internal/pgtest"
)

// Engine is a database engine a bench measures on: SQLite files in Dir,
// or databases on the PostgreSQL server at AdminURL.
type Engine struct {
	Name     string // "sqlite" or "postgres"
	Dir      string // sqlite: a temporary folder for the database files
	AdminURL string // postgres: the server's admin URL
	About    string // postgres: the server's version and where it came from, for the report
}

// OpenEngines prepares the engines named, each made into a bench's own
// engine type by wrap. PostgreSQL is pgtest.Acquire's
// server (COURIER_PG_URL or a throwaway one); when there is none it is
// left out with a note, unless COURIER_PG_REQUIRE is set, in which case
// that is an error. stop removes the SQLite folders and stops a server
// that was started.
func OpenEngines[E any](ctx context.Context, names []string, wrap func(Engine) E) (engines []E, notes []string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, name := range names {
		switch name {
		case "sqlite":
			dir, err := os.MkdirTemp("", "courier-bench-")
			if err != nil {
				stop()
				return nil, nil, nil, err
			}
			stops = append(stops, func() { os.RemoveAll(dir) })
			engines = append(engines, wrap(Engine{Name: name, Dir: dir}))
		case "postgres":
			url, about, stopServer, err := pgtest.Acquire(ctx)
			if err != nil {
				if v := os.Getenv("COURIER_PG_REQUIRE"); v == "1" || v == "true" {
					stop()
					return nil, nil, nil, fmt.Errorf("postgres: %w", err)
				}
				notes = append(notes, fmt.Sprintf("postgres: not measured: %v", err))
				continue
			}
			stops = append(stops, stopServer)
			engines = append(engines, wrap(Engine{Name: name, AdminURL: url, About: about}))
		default:
			stop()
			return nil, nil, nil, fmt.Errorf("unknown engine %q (want sqlite or postgres)", name)
		}
	}
	return engines, notes, stop, nil
}

// FillPayloadsSQL gives every delivery of a SQLite outbox that has no
// payload the payload its one parameter binds. SQLite keeps a delivery's
// payload in a table of its own (migration 13), which a fill of
// courier_outbox in one statement leaves empty; PostgreSQL keeps it in
// the delivery's row, which the fill writes.
const FillPayloadsSQL = `INSERT INTO courier_outbox_payload (id, payload)
SELECT o.id, ? FROM courier_outbox AS o WHERE NOT EXISTS (SELECT 1 FROM courier_outbox_payload AS p WHERE p.id = o.id)`
