package dispatch

import (
	"context"
	"errors"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/schedulers"
)

// staging is a batch's exchanges written into their lanes and not yet
// published, for one hand-off per lane rather than one per exchange: the
// lanes written, in the order first written; the lanes the writes found
// late (see keyLane), which are ready already; and, once published, the
// lanes to schedule. Its user holds the producer role of the lanes it
// writes (the source's goroutine, or Emit's lock).
type staging[T any] struct {
	lanes []*lane[T]        // holding staged exchanges
	ready []*lane[T]        // made ready: the late ones, then those publish claimed
	next  int               // how many of ready kick scheduled
	tasks []schedulers.Task // kick's, for a Batcher: reused
}

// stage writes x into its lane (e's group g, or id's) without publishing
// it: it is counted at its publication.
func (s *staging[T]) stage(e *engine[T], g int, k aggregate.Key, x *T) {
	l, late := e.put(g, k, x)
	if l.q.Staged() == 0 {
		s.lanes = append(s.lanes, l)
	}
	l.q.Stage()
	if late != nil {
		s.ready = append(s.ready, late)
	}
}

// empty reports whether nothing is staged nor waits for kick.
func (s *staging[T]) empty() bool { return len(s.lanes) == 0 && len(s.ready) == 0 }

// publish makes the staged exchanges visible, one atomic add per lane, and
// moves each lane it makes ready (claim) to the lanes kick schedules.
func (s *staging[T]) publish() {
	for _, l := range s.lanes {
		l.q.Flush()
		if l.claim() {
			s.ready = append(s.ready, l)
		}
	}
	clear(s.lanes)
	s.lanes = s.lanes[:0]
}

// kick schedules the lanes made ready, then forgets them: a run of lanes
// of one engine under one hold of its scheduler's lock when it is a
// schedulers.Batcher (a batch that touched many groups, or many ids under
// WithKeyOrdering), else one by one. A drain that runs inline in Schedule
// (schedulers.Immediate) may end the goroutine: the deferred call
// schedules the rest first.
func (s *staging[T]) kick() {
	defer s.kicked()
	for s.next < len(s.ready) {
		l := s.ready[s.next]
		end := s.next + 1
		for end < len(s.ready) && s.ready[end].e == l.e {
			end++
		}
		var b schedulers.Batcher
		if end-s.next > 1 && !l.e.halt.Load() {
			b, _ = l.e.sched.(schedulers.Batcher) // asked for a run of lanes only
		}
		if b == nil {
			s.next++
			l.e.schedule(l)
			continue
		}
		run := s.ready[s.next:end]
		s.next = end
		for _, r := range run {
			s.tasks = append(s.tasks, r.task)
		}
		err := b.ScheduleAll(s.tasks)
		clear(s.tasks)
		s.tasks = s.tasks[:0]
		if err != nil { // none was queued: as schedule does for each
			l.e.rejected(err)
			for _, r := range run {
				l.e.steal(r, ready)
			}
		}
	}
}

// kicked ends a kick: the lanes are forgotten once every one was scheduled,
// else (the goroutine ends) kick goes on with the rest.
func (s *staging[T]) kicked() {
	if s.next < len(s.ready) {
		s.kick()
		return
	}
	clear(s.ready)
	s.ready, s.next = s.ready[:0], 0
}

// emitBatch is the intake of a BatchSource's batch on the source's
// goroutine: each exchange is taken as emit takes it, in order, but staged
// in its lane; flush publishes each lane touched once, at the batch's end
// or before the goroutine waits for room. Once an exchange is refused, so
// is the rest of the batch, each accounted for, and the refusal is
// returned.
func (in *intake[T]) emitBatch(xs []T) (err error) {
	in.batching = true
	defer in.endBatch() // also when user code on the way ends the goroutine
	for i := range xs {
		if err = in.emitFn(xs[i]); err != nil {
			for _, x := range xs[i+1:] {
				in.refuse(x)
			}
			return err
		}
	}
	return nil
}

// endBatch publishes what the batch staged and leaves batching.
func (in *intake[T]) endBatch() {
	in.batching = false
	in.flush()
}

// flush publishes the source's staged exchanges and schedules the lanes
// made ready. Source's goroutine only.
func (in *intake[T]) flush() {
	in.staging.publish()
	in.staging.kick()
}

// emitRun bounds how many exchanges of an EmitBatch are admitted under one
// hold of the intake's lock, with the budget units taken at once.
const emitRun = 256

// EmitBatch pushes xs on the caller's goroutine, in order, as that many
// Emit calls would, but in runs of up to 256 exchanges: a run takes its
// budget units at once (as many as are free, waiting while none is),
// routes its exchanges (AggregateID or the key function, outside the lock),
// then writes them into their lanes and publishes each group's share at
// once, so that a hot group costs one hand-off per run rather than one per
// exchange. The exchanges of one run are admitted together: concurrent
// Emit and EmitBatch calls interleave only between runs. It returns how
// many exchanges of xs were taken: admitted, or counted and accounted for
// as Emit accounts for one it cannot route. When err is not nil, xs[n:]
// were neither admitted nor counted and stay the caller's, for the reasons
// Emit returns an error: ctx ended while the run waited for room (ctx's
// cause), the intake shut (ErrStopped), the dispatcher is not running
// (ErrStopped), or it has a source (ErrIllegalState). EmitBatch does not
// keep xs, and reads it until it returns. Safe for concurrent use. A
// panic of an Observer is recovered and logged, as for Emit: the batch goes
// on. A runtime.Goexit of user code on the way (the route, an Observer)
// ends the call as it ends Emit: the exchanges before the one it met are
// admitted, that one and the rest are not.
func (in *intake[T]) EmitBatch(ctx context.Context, xs []T) (n int, err error) {
	if err := in.pushable("EmitBatch"); err != nil {
		return 0, err
	}
	s, _ := in.runs.Get().(*emitScratch[T])
	if s == nil {
		s = new(emitScratch[T])
	}
	defer in.runs.Put(s)
	for n < len(xs) {
		k, err := in.emitRun(ctx, xs[n:min(len(xs), n+emitRun)], s)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// emitScratch is what one EmitBatch run keeps: the routes of its
// exchanges, and its staging.
type emitScratch[T any] struct {
	routes []emitRoute[T]
	staging[T]
}

// emitRoute is where an exchange of a run goes: e's group g (id's lane),
// i its index in the run.
type emitRoute[T any] struct {
	e *engine[T]
	g int
	k aggregate.Key
	i int
}

// emitRun admits a prefix of run, as many exchanges as budget units are
// free (at least one, waiting for it), and returns how many it took.
func (in *intake[T]) emitRun(ctx context.Context, run []T, s *emitScratch[T]) (int, error) {
	f := in.f
	units, err := f.budget.acquireUpTo(ctx, f.shutCh, int64(len(run)))
	if err != nil {
		if errors.Is(err, errIntakeClosed) {
			return 0, in.emitRefused()
		}
		return 0, err
	}
	f.emitting.Add(1)
	if f.shut.Load() {
		f.emitting.Add(-1)
		f.budget.release(units)
		f.check()
		return 0, in.emitRefused()
	}
	run = run[:units]
	s.routes = s.routes[:0]
	defer in.admitRun(run, s, &units) // also when user code on the way ends the goroutine
	for i := range run {
		e, g, k, ok := in.routeInRun(&run[i], &units)
		if ok {
			e.admitted()
			s.routes = append(s.routes, emitRoute[T]{e: e, g: g, k: k, i: i})
		}
	}
	return len(run), nil
}

// admitRun ends a run: it writes the routed exchanges into their lanes and
// publishes them, then schedules the lanes made ready. When user code on
// the way ended the goroutine, the exchanges routed before it are admitted
// (as Emit calls one at a time would have) and the units of the rest go
// back: they were not admitted.
func (in *intake[T]) admitRun(run []T, s *emitScratch[T], units *int64) {
	f := in.f
	in.emitMu.Lock() // held only for the queue writes: no user code under it
	for _, r := range s.routes {
		s.stage(r.e, r.g, r.k, &run[r.i])
	}
	s.publish() // counts the run's exchanges: their publication
	f.emitting.Add(-1)
	in.emitMu.Unlock()
	if rest := *units - int64(len(s.routes)); rest > 0 {
		f.budget.release(rest)
		f.check()
	} else if f.shut.Load() {
		f.check() // the run may have ended already, its check bailing out on this run
	}
	clear(s.routes) // the ids
	s.kick()        // outside the lock: on Immediate the handlers run here
}

// routeInRun routes an exchange of an EmitBatch run. One it cannot route,
// or whose route's user code panicked, is counted, gives its budget unit
// back (one of *units) and is accounted for as Emit accounts for it.
func (in *intake[T]) routeInRun(x *T, units *int64) (*engine[T], int, aggregate.Key, bool) {
	e, g, k, err := in.routeCaught(*x)
	if err == nil {
		return e, g, k, true
	}
	if p, ok := err.(*PanicError); ok {
		err = in.keyPanicked(p)
	}
	in.f.budget.release(1)
	*units--
	in.unrouted(*x, err)
	return nil, 0, aggregate.Key{}, false
}

// routeCaught is route with its user code's panic as the error.
func (in *intake[T]) routeCaught(x T) (e *engine[T], g int, k aggregate.Key, err error) {
	defer component.Catch(&err)
	return in.route(x)
}
