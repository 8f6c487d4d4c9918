package store

import (
	"context"
	"database/sql/driver"
	"errors"

	"github.com/jackc/pgx/v5/stdlib"
)

// pgChannel is the channel enqueues notify on commit (postgres/queries.sql).
const pgChannel = "courier_outbox"

// listenPostgres holds one connection in LISTEN on pgChannel and turns its
// notifications into wake-ups. When the connection fails the channel is
// closed: the worker falls back to polling and listens again later.
func listenPostgres(ctx context.Context, s *Store) (<-chan struct{}, func(), error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, nil, wrapf(err, "listen")
	}
	if _, err := conn.ExecContext(ctx, "LISTEN "+pgChannel); err != nil {
		conn.Close()
		return nil, nil, wrapf(err, "listen")
	}
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		_ = conn.Raw(func(dc any) error {
			c, ok := dc.(*stdlib.Conn)
			if !ok {
				return errors.New("store: not a pgx connection")
			}
			for {
				if _, err := c.Conn().WaitForNotification(ctx); err != nil {
					return err
				}
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		})
		// The connection is still LISTENing, or was interrupted mid-wait:
		// it must not go back to the pool.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		conn.Close()
	}()
	return ch, func() { cancel(); <-done }, nil
}
