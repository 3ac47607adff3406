package flux

import (
	"context"
	"fmt"
)

// DefaultGroupBuffer is the default capacity of each group's queue in
// GroupBy: Reactor's Queues.XS_BUFFER_SIZE.
const DefaultGroupBuffer = 32

// GroupOption configures GroupBy.
type GroupOption func(*groupOptions)

type groupOptions struct{ buffer int }

// WithGroupBuffer sets the capacity of each group's queue (default
// DefaultGroupBuffer); n < 1 makes GroupBy fail with ErrInvalidArgument.
// Reactor: the prefetch of Flux#groupBy(Function, int), here a hard bound
// per group rather than a shared request budget.
func WithGroupBuffer(n int) GroupOption {
	return func(o *groupOptions) { o.buffer = n }
}

// GroupBy splits f into at most groups groups by key: keyOf(v) must be in
// [0, groups). The first item of key k opens group k, emitted downstream as a
// GroupedFlux; later items of k are queued for it. Reactor: Flux#groupBy
// (FluxGroupBy.java), with a fixed key space and bounded queues.
//
// Threading: the upstream runs on the subscriber's goroutine (the router);
// each group is delivered on the goroutine that subscribes it, or on the
// worker of a PublishOn applied directly to the group flux, which then drains
// the group's queue in place (no second queue). A group flux is unicast.
//
// Backpressure: each group holds at most the group buffer (WithGroupBuffer)
// of items, the one being delivered included; the router blocks while the
// target group is full, so at most groups*buffer+1 items are pulled and not
// finished. A key outside [0, groups) (negative included) or a panic in keyOf
// ends the flow with an error wrapping ErrGroupKeyOutOfRange or a
// *PanicError.
//
// Termination: upstream completion completes every group once its queue is
// drained; an upstream error reaches every group after its queued items, and
// the main flux. Cancelling the main subscription (its downstream returned an
// error, or ctx ended) cancels every group: queued items go to the discard
// hook (WithDiscardHook[T]) and the groups' subscribers get the reason. When
// a group's subscriber cancels, its queued items are discarded and the next
// item of that key opens a new group (Reactor does the same).
//
// Deadlock rule (Reactor §1.9): the router blocks while it hands a group to a
// downstream that does not take it (FlatMap at its concurrency limit) or
// while a group nobody consumes is full. With FlatMap, a concurrency >= groups
// never stalls, for any key sequence; with fewer, once concurrency groups are
// open the flow stalls until ctx ends, because an open group only completes
// when the upstream does. ConcatMap over groups is the case concurrency 1.
// Groups that are never subscribed keep their items until a late subscriber
// takes them (the main flow may have completed by then).
func GroupBy[T any](f Flux[T], keyOf func(T) int, groups int, opts ...GroupOption) Flux[GroupedFlux[T]] {
	o := groupOptions{buffer: DefaultGroupBuffer}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case keyOf == nil:
		return Error[GroupedFlux[T]](invalid("GroupBy", "nil key function"))
	case groups < 1:
		return Error[GroupedFlux[T]](invalid("GroupBy", "groups below 1"))
	case o.buffer < 1:
		return Error[GroupedFlux[T]](invalid("GroupBy", "group buffer below 1"))
	}
	return Flux[GroupedFlux[T]]{subscribe: func(ctx context.Context, emit func(GroupedFlux[T]) error) error {
		discard := discarder[T](ctx)
		open := make([]*pipe[T], groups)
		cancelled := false
		err := f.run(ctx, func(v T) error {
			k, err := call1(keyOf, v)
			if err == nil && (k < 0 || k >= groups) {
				err = fmt.Errorf("flux: GroupBy: key %d not in [0, %d): %w", k, groups, ErrGroupKeyOutOfRange)
			}
			if err != nil {
				discard(v, err)
				return err
			}
			for {
				if g := open[k]; g != nil {
					err := g.push(ctx, v)
					if err != errGone {
						return err
					}
				}
				// No group for k yet, or its subscriber cancelled: open one
				// holding v, so that a subscriber draining it inline (as
				// ConcatMap does) finds its first item.
				g := newPipe(o.buffer, discard)
				_ = g.push(ctx, v)
				open[k] = g
				if err := emit(GroupedFlux[T]{Key: k, Flux: Flux[T]{subscribe: g.consume, group: g}}); err != nil {
					cancelled = true
					return err
				}
				return nil
			}
		})
		for _, g := range open {
			switch {
			case g == nil:
			case cancelled || ctx.Err() != nil:
				g.cancel(reasonOf(err), false)
			default:
				g.terminate(err)
			}
		}
		return err
	}}
}
