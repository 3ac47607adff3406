package flux

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/aggflow/aggflow/component"
)

// errChannelSubscribed is the error of a FromChannel subscription while
// another runs.
var errChannelSubscribed = fmt.Errorf("flux: FromChannel: a subscription already reads the channel: %w", ErrUnicastSource)

// Just emits vs in order, then completes.
func Just[T any](vs ...T) Flux[T] { return FromSlice(vs) }

// FromSlice emits the elements of s in order, then completes. The slice is
// read at each subscription, not copied.
func FromSlice[T any](s []T) Flux[T] {
	return Flux[T]{sync: true, subscribe: func(ctx context.Context, emit func(T) error) error {
		for _, v := range s {
			if err := ctxDone(ctx); err != nil {
				return err
			}
			if err := emit(v); err != nil {
				return err
			}
		}
		return nil
	}}
}

// Range emits count consecutive ints starting at start. count < 0 gives an
// error signal wrapping ErrInvalidArgument.
func Range(start, count int) Flux[int] {
	if count < 0 {
		return Error[int](invalid("Range", "negative count"))
	}
	return Flux[int]{sync: true, subscribe: func(ctx context.Context, emit func(int) error) error {
		for i := start; i < start+count; i++ {
			if err := ctxDone(ctx); err != nil {
				return err
			}
			if err := emit(i); err != nil {
				return err
			}
		}
		return nil
	}}
}

// Empty completes at once without items; so does the zero Flux.
func Empty[T any]() Flux[T] { return Flux[T]{} }

// Error fails at once with err (err nil: ErrInvalidArgument).
func Error[T any](err error) Flux[T] {
	if err == nil {
		err = invalid("Error", "nil error")
	}
	return Flux[T]{sync: true, subscribe: func(context.Context, func(T) error) error { return err }}
}

// Defer calls fn at each subscription and subscribes the Flux it returns. A
// panic in fn becomes *PanicError.
func Defer[T any](fn func() Flux[T]) Flux[T] {
	if fn == nil {
		return Error[T](invalid("Defer", "nil function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		f, err := callR(fn)
		if err != nil {
			return err
		}
		return f.run(ctx, emit)
	}}
}

// FromChannel emits what it receives from ch until ch is closed (completion)
// or the subscription's ctx ends. Unlike the other sources it is hot, not
// cold: every subscription reads the same channel, so it has one subscriber
// at a time: a Subscribe while another subscription runs gets an error
// wrapping ErrUnicastSource at once (two would split the items silently).
// A subscription after the previous one returned (a retry, say) takes what
// that one left, in order. To fan one channel out to several consumers,
// subscribe once and let FlatMap, GroupBy or Share split it. An item
// received is delivered, never put back: a subscription that ends leaves the
// rest in the channel. A nil channel gives ErrInvalidArgument. Costs one
// atomic swap per subscription.
func FromChannel[T any](ch <-chan T) Flux[T] {
	if ch == nil {
		return Error[T](invalid("FromChannel", "nil channel"))
	}
	var busy atomic.Bool // a subscription runs
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		if busy.Swap(true) {
			return errChannelSubscribed
		}
		defer busy.Store(false)
		for {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			// A ready item is taken with a plain receive; the two-way select,
			// several times dearer, only when the channel is empty.
			var v T
			var ok bool
			select {
			case v, ok = <-ch:
			default:
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case v, ok = <-ch:
				}
			}
			if !ok {
				return nil
			}
			if err := emit(v); err != nil {
				return err
			}
		}
	}}
}

// FromSeq emits the values of seq in order; a panic in seq becomes an error
// signal carrying *PanicError.
func FromSeq[T any](seq iter.Seq[T]) Flux[T] {
	if seq == nil {
		return Error[T](invalid("FromSeq", "nil sequence"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) (err error) {
		defer component.Catch(&err)
		for v := range seq {
			if err = ctxDone(ctx); err != nil {
				return err
			}
			if err = emit(v); err != nil {
				return err
			}
		}
		return nil
	}}
}

// Sink is the push side given to Create's function.
type Sink[T any] interface {
	// Next delivers v downstream and returns once downstream took it, so it
	// blocks while downstream buffers are full (backpressure). nil: v was
	// delivered and the downstream wants more. Otherwise the subscriber is
	// gone and the function should stop producing; the error tells what
	// became of v:
	//   - it wraps ErrNotDelivered when v never reached the downstream,
	//     because an earlier item's delivery had ended the flow, ctx had
	//     ended, or the Create function had returned; it also wraps that
	//     reason (the downstream's error, the cause of ctx, ErrCancelled). v
	//     is still the caller's, to keep or put back.
	//   - any other error is the downstream's own: v was handed to it, and
	//     it then failed or stopped the flow (Take satisfied by v, say).
	//     What became of v is the downstream's: delivered, or given to the
	//     discard hook by the operator that dropped it.
	// Safe for concurrent use; calls are serialized. A refusal costs one
	// allocation (the wrapping error).
	Next(v T) error
}

// errSinkClosed is returned by Sink.Next after the Create function returned.
var errSinkClosed = fmt.Errorf("flux: Create: sink used after its function returned: %w", ErrCancelled)

type sink[T any] struct {
	mu   sync.Mutex
	ctx  context.Context
	emit func(T) error
	err  error // sticky: once set, the subscriber is gone
}

func (s *sink[T]) Next(v T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = ctxDone(s.ctx)
	}
	if s.err != nil {
		return fmt.Errorf("%w: %w", ErrNotDelivered, s.err)
	}
	s.err = s.emit(v)
	return s.err
}

func (s *sink[T]) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.err
	if err == nil {
		s.err = errSinkClosed
	}
	return err
}

// Create runs fn at each subscription with a Sink that pushes downstream;
// fn's return value is the terminal signal (nil: completion). fn may hand
// the sink to other goroutines but must not return before they stopped
// using it: Next fails after fn returned. If downstream stopped the flow,
// that is the result whatever fn returns. A panic in fn becomes
// *PanicError. The blocking of Next is the backpressure.
func Create[T any](fn func(ctx context.Context, sink Sink[T]) error) Flux[T] {
	if fn == nil {
		return Error[T](invalid("Create", "nil function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		s := &sink[T]{ctx: ctx, emit: emit}
		// fn gets a context of its own identity: code of fn's that subscribes
		// a group elsewhere is not taken for one of the subscription's
		// inners by GroupBy's stall check.
		err := call2Err(fn, newScope(ctx), Sink[T](s))
		if down := s.close(); down != nil {
			return down
		}
		return err
	}}
}
