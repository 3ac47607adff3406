package flux

import (
	"context"
	"fmt"
	"sync"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/schedulers"
)

// PublishOn delivers the items and the terminal signal on one Worker of s
// (created per subscription, disposed at its end), in upstream order,
// through a queue of prefetch items; an upstream error arrives after the
// queued items.
//
// The upstream runs on the subscribing goroutine and blocks while the queue is
// full. A drain task on the worker delivers at most prefetch items per run and
// then schedules itself again, so many PublishOn pipelines share the
// scheduler's goroutines fairly. Subscribe returns once the drain delivered
// the terminal signal, so no task of the subscription outlives it.
//
// Applied directly to a group flux of GroupBy, PublishOn fuses with it: the
// drain polls the group's queue in place and frees an item's slot only after
// the downstream returned from it, so one hand-off (router to worker) is made
// per item and a group holds at most its buffer, the item being handled
// included; prefetch then only bounds the batch per run.
//
// The drain blocks its goroutine while the downstream blocks, and a
// downstream PublishOn blocks while its queue is full. So two PublishOn
// stages on one scheduler (directly or through synchronous operators) can
// take every goroutine of it with drains waiting for a later stage whose
// drain then has none to run on: PublishOn(s, 4).PublishOn(s, 1) on a pool
// of one hangs. Give each stage a scheduler of
// its own, or more goroutines than stages that may wait at once.
//
// If the worker rejects (the scheduler is disposed) or the scheduler
// terminates while the subscription waits (for the drain, or in the upstream
// for room in the queue), the queued items go to the discard hook and the
// flow fails with an error wrapping schedulers.ErrRejected.
// Cancellation (ctx, or the downstream returning an error) discards the
// queue too. s nil or prefetch < 1 gives ErrInvalidArgument.
func (f Flux[T]) PublishOn(s schedulers.Scheduler, prefetch int) Flux[T] {
	switch {
	case s == nil:
		return Error[T](invalid("PublishOn", "nil scheduler"))
	case prefetch < 1:
		return Error[T](invalid("PublishOn", "prefetch below 1"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		w, err := s.NewWorker()
		if err != nil {
			err = fmt.Errorf("flux: PublishOn: %w", err)
			if f.group != nil {
				// Nobody else will take this group: its queued items (and,
				// after an upstream completion, GroupBy has returned) would
				// otherwise be neither delivered nor discarded.
				f.group.abandon(err)
			}
			return err
		}
		defer w.Dispose()
		d := &drain[T]{q: f.group, worker: w, emit: emit, batch: prefetch, done: make(chan struct{})}
		d.task = d.run
		if d.q != nil {
			if err := d.q.claim(d.schedule, ctx); err != nil {
				return err
			}
			d.schedule()
			return d.wait(ctx, s)
		}
		d.q = newPipe(prefetch, discarder[T](ctx))
		// The drain task may be dropped by Dispose while the upstream waits
		// for room, and wait is only reached once the upstream returned.
		d.q.dead = s.Done()
		_ = d.q.claim(d.schedule, ctx)
		// The upstream's context ends when the drain does, so that an upstream
		// waiting for its next item (not pushing) learns of an early end.
		uctx, stop := context.WithCancelCause(ctx)
		defer stop(nil)
		d.stop = stop
		d.schedule()
		uerr := f.run(uctx, func(v T) error {
			err := d.q.push(uctx, v)
			if err == errDead {
				d.terminated(s)
				err = errGone
			}
			if err == errGone {
				err = d.q.reason()
				d.q.discard(v, err)
			}
			return err
		})
		if uerr != nil && ctx.Err() != nil {
			d.q.cancel(context.Cause(ctx), false)
		} else {
			d.q.terminate(uerr)
		}
		return d.wait(ctx, s)
	}}
}

// drain is PublishOn's task: it moves items from q to emit on the worker.
// The pipe's idle flag, guarded by its mutex, is a work-in-progress
// counter: a producer that finds the drain idle schedules it, and the drain
// runs until it finds q empty (and goes idle) or used up its batch (and
// schedules itself again). So at most one drain task is pending or running.
type drain[T any] struct {
	q      *pipe[T]
	worker schedulers.Worker
	emit   func(T) error
	batch  int
	task   schedulers.Task         // d.run, bound once so scheduling does not allocate
	stop   context.CancelCauseFunc // ends the upstream's context; nil when fused
	once   sync.Once
	done   chan struct{}
	err    error // the terminal signal delivered; read after done is closed
}

func (d *drain[T]) finish(err error) {
	d.once.Do(func() {
		d.err = err
		close(d.done)
		if d.stop != nil {
			d.stop(reasonOf(err))
		}
	})
}

// schedule runs the drain on the worker. It is called only when no drain is
// pending or running, so on rejection nothing else can deliver: the queue is
// discarded and the flow ends here.
func (d *drain[T]) schedule() {
	if err := d.worker.Schedule(d.task); err != nil {
		d.abort(fmt.Errorf("flux: PublishOn: %w", err), false)
	}
}

func (d *drain[T]) abort(err error, release bool) {
	d.q.cancel(err, release)
	d.finish(err)
}

// run is the drain task. A panic or a runtime.Goexit of the downstream
// aborts the flow, which would otherwise wait for a terminal signal that no
// drain will deliver; on a Goexit the goroutine then dies, as it must.
func (d *drain[T]) run(tctx context.Context) {
	release := false // the item delivered last still holds its slot
	err := component.Call(func() error { d.deliver(tctx, &release); return nil },
		func(p *PanicError) { d.abort(exitedAs("PublishOn", p), release) })
	if err != nil {
		d.abort(err, release)
	}
}

// deliver moves up to a batch of items to the downstream, then goes idle,
// schedules itself again or ends the flow. *release tells whether the item
// delivered last still holds its slot.
func (d *drain[T]) deliver(tctx context.Context, release *bool) {
	for n := 0; ; n++ {
		if tctx.Err() != nil {
			d.abort(fmt.Errorf("flux: PublishOn: %w: %w", schedulers.ErrRejected, context.Cause(tctx)), *release)
			return
		}
		if n == d.batch {
			if *release {
				d.q.release()
			}
			d.schedule()
			return
		}
		v, st, err := d.q.take(*release)
		*release = false
		switch st {
		case pollEmpty:
			return
		case pollEnd:
			d.finish(err)
			return
		}
		if err := d.emit(v); err != nil {
			d.abort(err, true)
			return
		}
		*release = true
	}
}

// wait blocks the subscribing goroutine until the drain delivered the
// terminal signal. ctx ending cancels the queue (the drain then delivers the
// cancellation); the scheduler terminating means no drain will ever run
// again, so the flow is ended here.
func (d *drain[T]) wait(ctx context.Context, s schedulers.Scheduler) error {
	cancelled := ctx.Done()
	for {
		select {
		case <-d.done:
			return d.err
		case <-cancelled:
			cancelled = nil
			d.q.cancel(context.Cause(ctx), false)
		case <-s.Done():
			d.terminated(s)
		}
	}
}

// terminated ends the flow, unless the drain already did, once the
// scheduler has terminated: no drain can run again.
func (d *drain[T]) terminated(s schedulers.Scheduler) {
	select {
	case <-d.done:
	default:
		d.abort(fmt.Errorf("flux: PublishOn: scheduler %s terminated: %w", s.Name(), schedulers.ErrRejected), false)
	}
}

// SubscribeOn runs the subscription of f (the source and every operator up
// to the next asynchronous boundary) inside one task on s; the subscriber
// waits for it. Rejection, or the scheduler terminating before the task
// ran, gives an error wrapping schedulers.ErrRejected.
func (f Flux[T]) SubscribeOn(s schedulers.Scheduler) Flux[T] {
	if s == nil {
		return Error[T](invalid("SubscribeOn", "nil scheduler"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		res := make(chan error, 1)
		err := s.Schedule(func(context.Context) {
			_ = component.Call(func() error { res <- runCaught(f, ctx, emit); return nil },
				func(p *PanicError) { res <- exitedAs("SubscribeOn", p) }) // runtime.Goexit in the flow: answer before dying
		})
		if err != nil {
			return fmt.Errorf("flux: SubscribeOn: %w", err)
		}
		select {
		case err := <-res:
			return err
		case <-s.Done():
			select {
			case err := <-res:
				return err
			default:
				return fmt.Errorf("flux: SubscribeOn: scheduler %s terminated: %w", s.Name(), schedulers.ErrRejected)
			}
		}
	}}
}
