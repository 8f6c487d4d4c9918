package store

import "context"

// Listen returns a channel that receives a value soon after an enqueue
// commits, where the engine can tell (in-process commits on SQLite opened
// with OpenSQLite or SQLiteDriver; pg_notify on PostgreSQL), and a func
// that stops listening. Wake-ups are hints: a worker still polls. The
// channel is closed if the engine's listener fails; listen again later.
func (o *Outbox) Listen(ctx context.Context) (<-chan struct{}, func(), error) {
	return o.s.dialect.listen(ctx, o.s)
}
