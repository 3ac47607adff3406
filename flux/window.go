package flux

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/component"
)

// Window splits f into consecutive windows of n items (the last may be
// shorter), each a Flux opened by its first item and completed once it
// holds n items. No empty window is emitted. A window flux is unicast, like
// a group of GroupBy: a second Subscribe gets an error wrapping
// ErrUnicastGroup. n < 1 gives ErrInvalidArgument.
//
// Threading: the upstream runs on a goroutine of the subscription (the
// router), which pushes each item into its window's queue, and the windows
// are handed downstream on the subscribing goroutine, one at a time, in
// order: the router opens a window with its first item and waits until
// the subscribing goroutine takes it, so a downstream that runs a window
// to its end before taking the next (ConcatMap) sees the items as they
// come, and at most one window beyond the one it runs holds items. Each
// window is delivered on the
// goroutine that subscribes it. The router has exited when the
// subscription returns. Backpressure: a window's queue holds its n items,
// so the router never waits for a slow window, only for the hand-over of
// the next one. Cost: one goroutine per subscription; per window, a queue
// of n slots and one channel hand-over; per item, one queue push.
//
// Termination: upstream completion completes the window open; an upstream
// error reaches it after its queued items, then the main flux. A window
// whose subscriber cancels it (Take on the window, say) is abandoned: its
// queued items and the rest of its n items as they arrive go to the
// discard hook (DoOnDiscard) with the subscriber's reason, and the
// next window starts after them. When the main flux's
// downstream stops early (Take satisfied), the window open goes on until
// it is full or abandoned, and then the upstream is cancelled; an item
// that would open another window is discarded with ErrCancelled. When the
// downstream fails or ctx ends, the window open and the one waiting to be
// handed are cancelled at once: queued items are discarded with the
// reason. A window handed out and never subscribed keeps its items until a
// late subscriber takes them, as a group of GroupBy does, unless the flow
// fails or ctx ends: then they are cancelled too, their items discarded.
func Window[T any](f Flux[T], n int) Flux[Flux[T]] {
	if n < 1 {
		return Error[Flux[T]](invalid("Window", "size below 1"))
	}
	return window("Window", f, n, 0)
}

// WindowTimeout is Window whose windows also complete d after their first
// item, whichever comes first. A window opens with its first item, so no
// empty window is emitted. The timer is one time.AfterFunc per window, its
// goroutine joined before the router ends. n < 1 or d <= 0 gives
// ErrInvalidArgument.
func WindowTimeout[T any](f Flux[T], n int, d time.Duration) Flux[Flux[T]] {
	switch {
	case n < 1:
		return Error[Flux[T]](invalid("WindowTimeout", "size below 1"))
	case d <= 0:
		return Error[Flux[T]](invalid("WindowTimeout", "duration not positive"))
	}
	return window("WindowTimeout", f, n, d)
}

func window[T any](op string, f Flux[T], n int, d time.Duration) Flux[Flux[T]] {
	return Flux[Flux[T]]{subscribe: func(ctx context.Context, emit func(Flux[T]) error) error {
		var router sync.WaitGroup
		defer router.Wait() // on every exit, a runtime.Goexit of the downstream included
		uctx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		w := &windower[T]{
			op: op, n: n, d: d, uctx: uctx, stop: stop, discard: discarder[T](ctx),
			out: make(chan *pipe[T]), quit: make(chan struct{}), halt: newStop(),
		}
		res := make(chan error, 1)
		router.Add(1)
		component.Go(func() error { return w.route(f) }, func(err error) {
			defer router.Done()
			res <- exitedAs(op, err) // a runtime.Goexit in the upstream included
		})
		return w.hand(ctx, emit, res)
	}}
}

// windower is the state of one Window subscription. cur, count, seq and
// stopped are shared by the router, the subscribing goroutine and the
// timer, under mu, which is never held across a call out of the package.
type windower[T any] struct {
	op      string
	n       int
	d       time.Duration // 0: no timer
	uctx    context.Context
	stop    context.CancelCauseFunc
	discard func(T, error)
	out     chan *pipe[T] // router -> subscribing goroutine
	quit    chan struct{} // closed when the subscribing goroutine takes no more windows
	halt    *stopError    // ends the upstream after an early stop of the main flux
	alarm   alarm

	mu      sync.Mutex
	cur     *pipe[T] // the window open; nil between windows
	count   int      // items pushed to cur
	seq     uint64   // the number of cur; a timer of another is stale
	stopped bool     // the main flux's downstream stopped early
	mainErr error    // why it went away; set before quit is closed
}

// hand runs on the subscribing goroutine: it emits each window the router
// opens, and returns once the router has ended. The windows handed out
// and not subscribed yet are cancelled when the flow fails.
func (w *windower[T]) hand(ctx context.Context, emit func(Flux[T]) error, res <-chan error) error {
	var handed []*pipe[T] // not subscribed when last looked at
	for {
		select {
		case p := <-w.out:
			handed = append(slices.DeleteFunc(handed, claimed), p)
			if err := emit(w.flux(p)); err != nil {
				w.cancelMain(err)
				close(w.quit)
				<-res
				if !isStop(err) {
					abandon(handed, err)
				}
				return err
			}
		case uerr := <-res:
			if err := ctxDone(ctx); err != nil {
				abandon(handed, err)
			}
			return uerr
		}
	}
}

// claimed tells whether p has a subscriber.
func claimed[T any](p *pipe[T]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.claimed
}

// claimedBy tells whether p's subscriber subscribed with ctx.
func claimedBy[T any](p *pipe[T], ctx context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctx == ctx
}

// abandon cancels the windows nobody subscribed, discarding their items.
func abandon[T any](ps []*pipe[T], reason error) {
	for _, p := range ps {
		p.abandon(reason)
	}
}

// cancelMain handles the main flux's downstream going away with err: an
// early stop lets the open window run on, a failure cancels everything.
func (w *windower[T]) cancelMain(err error) {
	w.mu.Lock()
	p := w.cur
	w.mainErr = err
	if isStop(err) {
		w.stopped = true
		w.mu.Unlock()
		if p == nil {
			w.stop(w.halt)
		}
		return
	}
	w.cur = nil
	w.alarm.disarm()
	w.mu.Unlock()
	w.stop(err)
	if p != nil {
		p.cancel(err, false)
	}
}

// flux is the unicast window flux of p.
func (w *windower[T]) flux(p *pipe[T]) Flux[T] {
	var claimed atomic.Bool
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		if claimed.Swap(true) {
			return fmt.Errorf("flux: %s: second subscription to a window: %w", w.op, ErrUnicastGroup)
		}
		err := p.consume(ctx, emit)
		if errors.Is(err, ErrUnicastGroup) && !claimedBy(p, ctx) {
			return p.reason() // abandoned by a failure before this first subscriber came
		}
		return err
	}}
}

// route runs the upstream on the router goroutine and ends the window
// open with its end.
func (w *windower[T]) route(f Flux[T]) (uerr error) {
	// The window open is ended on every exit, a runtime.Goexit in the
	// upstream included (with the Goexit's error then).
	uerr = component.Call(func() error { return f.run(w.uctx, w.next) }, func(p *component.PanicError) {
		err := exitedAs(w.op, p)
		w.closeOpen(&err)
	})
	w.closeOpen(&uerr)
	return uerr
}

// closeOpen ends the window open with the upstream's end, *uerr.
func (w *windower[T]) closeOpen(uerrp *error) {
	uerr := *uerrp
	w.alarm.disarm()
	w.alarm.wait()
	w.mu.Lock()
	p := w.cur
	w.cur = nil
	w.mu.Unlock()
	switch {
	case p == nil:
	case uerr == nil || errors.Is(uerr, w.halt):
		p.terminate(nil)
	case w.uctx.Err() != nil:
		p.cancel(context.Cause(w.uctx), false)
	default:
		p.terminate(uerr)
	}
}

// next pushes v into its window, opening one with it if none is open.
func (w *windower[T]) next(v T) error {
	if err := ctxDone(w.uctx); err != nil {
		w.discard(v, err)
		return err
	}
	w.mu.Lock()
	p := w.cur
	if p == nil {
		return w.open(v)
	}
	full, err := w.push(p, v)
	done := w.stopped && (full || err == errGone)
	w.mu.Unlock()
	if err == errGone {
		w.discard(v, p.reason()) // an abandoned window
	}
	if done {
		return w.halt
	}
	return nil
}

// push adds v to the window open, p, completing it once it holds n items.
// Under mu. It never waits: the queue has a slot for each item of the
// window.
func (w *windower[T]) push(p *pipe[T], v T) (full bool, err error) {
	w.count++
	full = w.count == w.n
	err = p.push(w.uctx, v)
	if full {
		w.cur = nil
		w.alarm.disarm()
		p.terminate(nil)
	}
	return full, err
}

// open starts a window with v, its timer counting from now, and hands it
// to the subscribing goroutine; a window that cannot be handed is
// cancelled, v with it. Called under mu, which it releases.
func (w *windower[T]) open(v T) error {
	if w.stopped {
		w.mu.Unlock()
		w.discard(v, ErrCancelled)
		return w.halt
	}
	p := newPipe(w.n, w.discard)
	w.cur, w.count = p, 0
	w.seq++
	if full, _ := w.push(p, v); !full && w.d > 0 {
		seq := w.seq
		w.alarm.arm(w.d, func() { w.expire(seq) })
	}
	w.mu.Unlock()
	var err error
	select {
	case w.out <- p:
		return nil
	case <-w.quit:
		w.mu.Lock()
		err = w.mainErr
		w.mu.Unlock()
	case <-w.uctx.Done():
		err = context.Cause(w.uctx)
	}
	w.mu.Lock()
	if w.cur == p {
		w.cur = nil
		w.alarm.disarm()
	}
	w.mu.Unlock()
	p.cancel(err, false)
	return err
}

// expire completes window number seq when its time is up.
func (w *windower[T]) expire(seq uint64) {
	w.mu.Lock()
	p := w.cur
	if p == nil || w.seq != seq {
		w.mu.Unlock()
		return
	}
	w.cur = nil
	stopped := w.stopped
	p.terminate(nil)
	w.mu.Unlock()
	if stopped {
		w.stop(w.halt)
	}
}
