package flux

import (
	"context"
	"fmt"
)

// errSwitched is the cause with which SwitchMap cancels its current inner
// when the next item arrives; what the inner pushes after it is discarded
// with it.
var errSwitched = fmt.Errorf("flux: SwitchMap: switched to the next inner: %w", ErrSuperseded)

// SwitchMap maps each item to an inner Flux and emits the items of the
// latest inner only: an item arriving cancels the current inner (its items
// pushed after that go to the discard hook with an error wrapping
// ErrSuperseded) and subscribes the next once the cancelled one has
// returned. It completes when the upstream completed and the last inner
// completed; the first error, of the upstream, an inner, fn (a panic) or
// the downstream, cancels everything else and ends the flow. Reactor:
// Flux#switchMap(Function) (FluxSwitchMapNoPrefetch.java).
//
// The upstream runs on the subscribing goroutine; the inners run one after
// another on one goroutine of the subscription, which delivers their items,
// so items reach the downstream serially. An inner that ignores its
// context's cancellation holds the upstream back until it returns. Costs
// one goroutine per subscription, and per item of the upstream a context
// and a hand-off to that goroutine. fn nil gives ErrInvalidArgument.
func SwitchMap[T, R any](f Flux[T], fn func(T) Flux[R]) Flux[R] {
	if fn == nil {
		return Error[R](invalid("SwitchMap", "nil function"))
	}
	return Flux[R]{subscribe: func(ctx context.Context, emit func(R) error) (err error) {
		s := &switcher[R]{crew: newCrew(ctx), emit: emit, discard: discarder[R](ctx)}
		defer func() { s.close(reasonOf(err)) }()
		resume := resumer[T](ctx)
		refuse := discarder[T](ctx)
		err = f.run(s.ctx, func(v T) error {
			if err := ctxDone(s.ctx); err != nil {
				refuse(v, err) // an upstream item after the end
				return err
			}
			inner, err := call1(fn, v)
			if err != nil {
				return resume(v, err)
			}
			return s.switchTo(inner)
		})
		if err == nil {
			s.await()
		}
		return s.end(err)
	}}
}

// switcher runs the inners of one SwitchMap subscription on its worker
// goroutine, one at a time. The upstream side (switchTo, await, close) is
// called from one goroutine only.
type switcher[R any] struct {
	*crew
	emit    func(R) error
	discard func(R, error)
	jobs    chan switchJob[R]
	idle    chan struct{} // a token each time an inner returned
	exited  chan struct{} // closed when the worker exits
	running bool          // a job was sent whose token was not taken
	stop    context.CancelCauseFunc
}

type switchJob[R any] struct {
	f   Flux[R]
	ctx context.Context
}

// switchTo cancels the current inner, waits for it to return and hands
// inner to the worker, started at the first call.
func (s *switcher[R]) switchTo(inner Flux[R]) error {
	if s.jobs == nil {
		s.jobs, s.idle, s.exited = make(chan switchJob[R]), make(chan struct{}, 1), make(chan struct{})
		s.wg.Add(1)
		go s.work()
	}
	if s.running {
		s.stop(errSwitched)
		s.await()
	}
	ictx, stop := context.WithCancelCause(s.ctx)
	select {
	case s.jobs <- switchJob[R]{inner, ictx}:
		s.running, s.stop = true, stop
		return nil
	case <-s.exited:
		stop(nil)
		return s.end(nil)
	}
}

// await waits until the current inner, if any, returned.
func (s *switcher[R]) await() {
	if !s.running {
		return
	}
	select {
	case <-s.idle:
	case <-s.exited:
	}
	s.running = false
}

// close cancels whatever still runs with reason and joins the worker.
func (s *switcher[R]) close(reason error) {
	s.cancel(reason)
	if s.jobs != nil {
		close(s.jobs)
	}
	s.wg.Wait()
}

// work is the worker: it runs each inner with ctx, delivering its items
// while the inner is current. An inner's error ends the flow unless the
// inner was switched away from; a runtime.Goexit of the downstream ends it
// too, and the worker dies, as it must.
func (s *switcher[R]) work() {
	defer s.wg.Done()
	defer close(s.exited)
	returned := false
	defer func() {
		if !returned {
			s.cancel(goexitError("SwitchMap"))
		}
	}()
	var cur context.Context
	out := func(r R) error {
		if err := ctxDone(cur); err != nil {
			s.discard(r, err)
			return err
		}
		if err := s.emit(r); err != nil {
			s.cancel(err)
			return err
		}
		return nil
	}
	for j := range s.jobs {
		cur = j.ctx
		if err := runCaught(j.f, j.ctx, out); err != nil && context.Cause(j.ctx) != errSwitched {
			s.cancel(err)
		}
		s.idle <- struct{}{}
	}
	returned = true
}
