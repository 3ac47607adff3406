package flux

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// RepeatSpec is when and how RepeatWhen subscribes again after a
// completion, with the schedule of waits given as a
// github.com/cenkalti/backoff/v5 BackOff. The zero RepeatSpec repeats
// nothing.
type RepeatSpec struct {
	// MaxRepeats is how many times the upstream is subscribed again after
	// it completed, in all. Below 0 gives ErrInvalidArgument.
	MaxRepeats int
	// OnlyIf tells, after each completion, whether to repeat, given the
	// number of repeats made so far (0 after the first completion); false
	// completes the flow. nil: always, up to MaxRepeats.
	OnlyIf func(repeats int) bool
	// BackOff returns the waits before each repeat, called once per
	// subscription (a BackOff is stateful and not safe for concurrent
	// use). A wait of backoff.Stop completes the flow instead of
	// repeating. nil: no wait.
	BackOff func() backoff.BackOff
}

// RepeatTimes repeats at once, up to n times.
func RepeatTimes(n int) RepeatSpec { return RepeatSpec{MaxRepeats: n} }

// RepeatFixedDelay repeats up to n times, each d after the completion
// before it.
func RepeatFixedDelay(n int, d time.Duration) RepeatSpec {
	return RepeatSpec{MaxRepeats: n, BackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(d) }}
}

// Repeat subscribes f again each time it completes, n times, so that the
// downstream sees the items of a cold source n+1 times, then the
// completion: Repeat(0) is f. It is RepeatWhen(RepeatTimes(n)): an error
// ends the flow without a repeat; n = math.MaxInt repeats without end
// (stop it with Take or ctx). n < 0 gives ErrInvalidArgument.
func (f Flux[T]) Repeat(n int) Flux[T] {
	if n < 0 {
		return Error[T](invalid("Repeat", "negative count"))
	}
	return f.RepeatWhen(RepeatTimes(n))
}

// RepeatWhen subscribes f again when it completes, as spec says, and
// completes once the repeats ran out, OnlyIf said false or the schedule
// said backoff.Stop. The error signal of the upstream, an error of the
// downstream, an early stop and the end of ctx end the flow without a
// repeat. Each subscription of f is a fresh one on the subscribing
// goroutine, after the previous returned, so items keep their order.
//
// Each wait is a time.Timer on the subscribing goroutine, cut short by the
// end of ctx (its cause is then the signal): no goroutine, and it runs on
// the fake clock under testing/synctest. A panic in OnlyIf, spec.BackOff or
// the BackOff's methods ends the flow with *PanicError. spec.MaxRepeats < 0
// gives ErrInvalidArgument.
func (f Flux[T]) RepeatWhen(spec RepeatSpec) Flux[T] {
	if spec.MaxRepeats < 0 {
		return Error[T](invalid("RepeatWhen", "negative repeats"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		var schedule backoff.BackOff
		if spec.BackOff != nil {
			b, err := callR(spec.BackOff)
			if err != nil {
				return err
			}
			schedule = b
		}
		var timer *time.Timer
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		for repeats := 0; ; repeats++ {
			if err := ctxDone(ctx); err != nil {
				return err
			}
			if err := f.run(ctx, emit); err != nil || repeats == spec.MaxRepeats {
				return err
			}
			if spec.OnlyIf != nil {
				again, err := call1(spec.OnlyIf, repeats)
				if err != nil || !again {
					return err
				}
			}
			if schedule == nil {
				continue
			}
			d, err := callR(schedule.NextBackOff)
			switch {
			case err != nil:
				return err
			case d == backoff.Stop:
				return nil
			case timer == nil:
				timer = time.NewTimer(d)
			default:
				timer.Reset(d)
			}
			if err := sleep(ctx, timer); err != nil {
				return err
			}
		}
	}}
}
