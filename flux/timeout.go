package flux

import (
	"context"
	"fmt"
	"time"
)

// Timeout fails with an error wrapping ErrTimeout when no item arrives
// within d: of the subscription for the first item, of the return of the
// previous item's delivery for the next ones, and likewise for the terminal
// signal. The time the downstream spends on an item does not count. d <= 0
// gives ErrInvalidArgument.
//
// The race of the timeout with an item or the upstream's end is decided
// exactly once: an item that arrives after the timeout fired is not
// delivered but given to the discard hook (DoOnDiscard) with the
// timeout error, and an upstream end after it is ignored. The timeout
// cancels the upstream's context with the timeout error as its cause and
// the error is signalled once the upstream returned: at once for an
// upstream that watches its context. The timer is one
// time.AfterFunc per item, its goroutine joined before Timeout returns.
func (f Flux[T]) Timeout(d time.Duration) Flux[T] {
	if d <= 0 {
		return Error[T](invalid("Timeout", "duration not positive"))
	}
	return f.timeout("Timeout", d, nil)
}

// TimeoutTo is Timeout that, instead of failing, goes on with fallback once
// the timeout fired: fallback is subscribed after the upstream returned,
// with no timeout of its own. d <= 0 gives ErrInvalidArgument; the zero
// Flux as fallback completes at the timeout.
func (f Flux[T]) TimeoutTo(d time.Duration, fallback Flux[T]) Flux[T] {
	if d <= 0 {
		return Error[T](invalid("TimeoutTo", "duration not positive"))
	}
	return f.timeout("TimeoutTo", d, &fallback)
}

func (f Flux[T]) timeout(op string, d time.Duration, fallback *Flux[T]) Flux[T] {
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		discard := discarder[T](ctx)
		var a alarm
		// On every exit, a runtime.Goexit of the downstream included: stop
		// the timer, end the upstream's context, join the timer's goroutine.
		defer a.wait()
		uctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer a.disarm()
		expired := fmt.Errorf("flux: %s: no signal within %v: %w", op, d, ErrTimeout)
		fire := func() { cancel(expired) }
		a.arm(d, fire)
		armed, timedOut := true, false // armed: an arming of ours is pending or fired
		err := f.run(uctx, func(v T) error {
			armed = false
			if !a.disarm() {
				timedOut = true
				discard(v, expired)
				return expired
			}
			if err := emit(v); err != nil {
				return err
			}
			a.arm(d, fire)
			armed = true
			return nil
		})
		if armed && !a.disarm() {
			timedOut = true
		}
		a.wait()
		switch {
		case !timedOut:
			return err
		case fallback != nil:
			return fallback.run(ctx, emit)
		}
		return expired
	}}
}
