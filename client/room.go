package client

import (
	"sync"
	"time"
)

// inFlight is an attempt in flight, as begin recorded it.
type inFlight struct {
	began time.Time
	given bool // its lease given up, and counted in Worker.given
}

// begin records that an attempt, holding a slot, starts now and returns
// its number, for giveBack and end.
func (w *Worker) begin() uint64 {
	w.running.Lock()
	defer w.running.Unlock()
	w.next++
	w.started[w.next] = inFlight{began: time.Now()}
	return w.next
}

// giveBack records that attempt n's lease is the worker's no more (its
// outcome recorded, or the lease found lost: see settler.settle), telling
// a Run waiting for room in an endpoint's share (await), unless that was
// counted already. A lease given back unsent is counted by end.
func (w *Worker) giveBack(n uint64) {
	w.running.Lock()
	a, ok := w.started[n]
	counted := ok && !a.given
	if counted {
		a.given = true
		w.started[n] = a
		w.given.Add(1)
	}
	w.running.Unlock()
	if counted {
		w.changed.notify()
	}
}

// end records that attempt n ended and gives back its slot, and its lease
// if giveBack did not (as far as the worker goes: a settle that failed
// leaves it to expire), telling a Run waiting for room (await).
func (w *Worker) end(n uint64) {
	w.running.Lock()
	if !w.started[n].given {
		w.given.Add(1)
	}
	delete(w.started, n)
	w.running.Unlock()
	w.freeSlot()
}

// freeSlot gives back an attempt's slot, telling a Run waiting for one
// (await).
func (w *Worker) freeSlot() {
	<-w.slots
	w.ended.Add(1)
	w.changed.notify()
}

// lingering returns how many attempts in flight began d or more ago.
func (w *Worker) lingering(d time.Duration) int {
	w.running.Lock()
	defer w.running.Unlock()
	n := 0
	for _, a := range w.started {
		if time.Since(a.began) >= d {
			n++
		}
	}
	return n
}

// mark is the room counters as a Run's claim saw them: ended as it
// counted the free slots, given as it asked the store, which counted the
// leases given up before then.
type mark struct{ ended, given int64 }

// roomNow returns the room counters now.
func (w *Worker) roomNow() mark { return mark{ended: w.ended.Load(), given: w.given.Load()} }

// roomToCome returns how many leases have been given up since m, and are
// yet to be by the attempts in flight: the most a Run that claimed at m
// can wait for.
func (w *Worker) roomToCome(m mark) int {
	w.running.Lock()
	defer w.running.Unlock()
	n := int(w.given.Load() - m.given)
	for _, a := range w.started {
		if !a.given {
			n++
		}
	}
	return n
}

// slotFreed returns a report of whether an attempt has ended since m.
func (w *Worker) slotFreed(m mark) func() bool {
	return func() bool { return w.ended.Load() > m.ended }
}

// givenBack returns a report of whether need leases have been given up
// since m.
func (w *Worker) givenBack(m mark, need int) func() bool {
	return func() bool { return w.given.Load()-m.given >= int64(need) }
}

// signal tells every goroutine waiting for a change that one came: each
// takes wait's channel before it looks at what it waits for, and notify
// closes that channel.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
