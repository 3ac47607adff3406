package flux

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// RetrySpec is when and how RetryWhen subscribes again after an error, with
// the schedule of waits given as a github.com/cenkalti/backoff/v5 BackOff.
// The zero RetrySpec retries nothing.
type RetrySpec struct {
	// MaxAttempts is how many times the upstream is subscribed again after
	// it failed, in all (not reset by items). Below 0
	// gives ErrInvalidArgument.
	MaxAttempts int
	// BackOff returns the waits before each new attempt, called once per
	// subscription (a BackOff is stateful and not safe for concurrent use).
	// A wait of backoff.Stop ends the retries as if the attempts had run
	// out. nil: no wait.
	BackOff func() backoff.BackOff
	// Filter tells which errors are retried (nil: all); the others are
	// the error signal at once.
	Filter func(error) bool

	// invalid is the error of a constructor's invalid argument, the
	// signal of RetryWhen.
	invalid error
}

// RetryMax retries at once, up to maxAttempts times.
func RetryMax(maxAttempts int) RetrySpec { return RetrySpec{MaxAttempts: maxAttempts} }

// RetryFixedDelay retries up to maxAttempts times, waiting delay before
// each new attempt: a timer of exactly delay, never shorter (unless the
// upstream's error is a backoff.RetryAfterError, whose duration is the
// wait). delay 0 retries at once; delay < 0 gives a spec whose RetryWhen
// signals ErrInvalidArgument.
func RetryFixedDelay(maxAttempts int, delay time.Duration) RetrySpec {
	if delay < 0 {
		return RetrySpec{invalid: invalid("RetryFixedDelay", "negative delay")}
	}
	return RetrySpec{MaxAttempts: maxAttempts, BackOff: func() backoff.BackOff {
		return backoff.NewConstantBackOff(delay)
	}}
}

// WithFilter returns s retrying only the errors for which pred returns
// true (it replaces s.Filter; nil retries all); the others are the error
// signal at once, as they are. pred runs once per error signal of the
// upstream, on the subscribing goroutine; its panic ends the flow with
// *PanicError joined to the error.
func (s RetrySpec) WithFilter(pred func(error) bool) RetrySpec {
	s.Filter = pred
	return s
}

// RetryBackoff retries up to maxAttempts times with exponential backoff:
// the k-th wait is d = minBackoff*2^(k-1), uncapped, with a jitter of ±50%
// of d drawn uniformly but never below minBackoff, so the first wait is in
// [minBackoff, 1.5*minBackoff] and the k-th in [max(minBackoff, d/2),
// 1.5*d]. For a cap or another jitter, give a backoff.ExponentialBackOff of
// your own as BackOff.
func RetryBackoff(maxAttempts int, minBackoff time.Duration) RetrySpec {
	return RetrySpec{MaxAttempts: maxAttempts, BackOff: func() backoff.BackOff {
		return &jitteredBackOff{min: minBackoff}
	}}
}

// jitteredBackOff is the schedule of RetryBackoff: RetryBackoffSpec's
// jitter, whose low bound is max(min-d, -d/2) (backoff.ExponentialBackOff's
// is -d/2, which takes the first wait down to min/2).
type jitteredBackOff struct {
	min time.Duration
	k   int // waits given since the last Reset
}

func (b *jitteredBackOff) NextBackOff() time.Duration {
	const limit = float64(math.MaxInt64)
	d := min(float64(b.min)*math.Exp2(float64(b.k)), limit)
	b.k++
	lo, hi := max(float64(b.min)-d, -d/2), min(limit-d, d/2)
	w := d + lo + rand.Float64()*(hi-lo)
	if w >= limit {
		return math.MaxInt64
	}
	return time.Duration(w)
}

func (b *jitteredBackOff) Reset() { b.k = 0 }

// RetryWhen subscribes f again when it fails, as spec says. The items of a
// failed attempt have been delivered: a retry starts the sequence afresh,
// it does not roll it back. An error of the downstream, an early stop and
// the end of ctx are never retried. Once the attempts or the schedule run
// out the flow fails with an error wrapping ErrRetriesExhausted and the
// last error of the upstream; an error that Filter rejects is returned as
// it is.
//
// The loop is backoff.Retry (github.com/cenkalti/backoff/v5): each wait is
// a time.Timer on the subscribing goroutine, cut short at once by the end
// of ctx (its cause is then the signal); no goroutine, and it runs on the
// fake clock under testing/synctest. A panic in Filter, in spec.BackOff or
// in the BackOff's methods ends the flow with *PanicError. spec.MaxAttempts
// < 0 gives ErrInvalidArgument; minBackoff of RetryBackoff is not checked.
func (f Flux[T]) RetryWhen(spec RetrySpec) Flux[T] {
	switch {
	case spec.invalid != nil:
		return Error[T](spec.invalid)
	case spec.MaxAttempts < 0:
		return Error[T](invalid("RetryWhen", "negative attempts"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) error {
		schedule := backoff.BackOff(&backoff.ZeroBackOff{})
		if spec.BackOff != nil {
			b, err := callR(spec.BackOff)
			if err != nil {
				return err
			}
			schedule = b
		}
		g := &guardedBackOff{b: schedule}
		attempts := 0
		attempt := func() (struct{}, error) {
			attempts++
			sig, err := f.observe(ctx, emit)
			switch {
			case sig == SignalComplete:
				return struct{}{}, nil
			case sig == SignalCancel || g.panic != nil:
				return struct{}{}, backoff.Permanent(err)
			}
			if spec.Filter != nil {
				retry, perr := call1(spec.Filter, err)
				if perr != nil {
					return struct{}{}, backoff.Permanent(errors.Join(err, perr))
				}
				if !retry {
					return struct{}{}, backoff.Permanent(err)
				}
			}
			return struct{}{}, &retryable{err}
		}
		_, err := backoff.Retry(ctx, attempt,
			backoff.WithBackOff(g),
			backoff.WithMaxTries(uint(spec.MaxAttempts)+1),
			backoff.WithMaxElapsedTime(0))
		if p, ok := err.(*backoff.PermanentError); ok {
			// On its last try backoff.Retry returns the wrapper itself.
			err = p.Unwrap()
		}
		r, exhausted := err.(*retryable)
		switch {
		case g.panic != nil && exhausted:
			return errorsJoin(r.err, g.panic)
		case g.panic != nil:
			return errorsJoin(err, g.panic)
		case exhausted:
			return fmt.Errorf("flux: RetryWhen: %w after %d retries: %w", ErrRetriesExhausted, attempts-1, r.err)
		}
		return err
	}}
}

// retryable marks the upstream's errors that RetryWhen may retry, so that
// the one backoff.Retry returns at the end of the retries is told from the
// others; errors.As sees through it (a backoff.RetryAfterError sets the
// next wait).
type retryable struct{ err error }

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// guardedBackOff turns a panic of the user's BackOff into the end of the
// retries, remembered as *PanicError.
type guardedBackOff struct {
	b     backoff.BackOff
	panic error
}

func (g *guardedBackOff) NextBackOff() (d time.Duration) {
	d, err := callR(g.b.NextBackOff)
	if err != nil {
		g.panic = err
		return backoff.Stop
	}
	return d
}

func (g *guardedBackOff) Reset() {
	if err := call0(g.b.Reset); err != nil {
		g.panic = err
	}
}
