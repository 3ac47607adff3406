package middleware

import (
	"context"
	"errors"
	"fmt"

	"github.com/aggflow/aggflow/dispatch"
)

// DeadLetter returns a middleware that gives hook each exchange whose
// handler failed for good: put it outermost, around Retry, so that hook sees
// only the final failure. hook gets the handler's ctx, the exchange and the
// error; it might park the exchange on a dead-letter queue or record it.
//
//   - hook returns nil: the exchange counts as handled and the handler
//     returns nil (the dispatcher counts it Succeeded; a broker source acks
//     it, and the group goes on past it).
//   - hook returns an error: the handler returns errors.Join(err, an error
//     wrapping ErrDeadLetter and hook's), and the exchange fails as before.
//   - The handler failed once its ctx had ended (a ForceStop cancelled it,
//     or a Timeout around this middleware expired): hook is not called and
//     the error passes unchanged, because the exchange failed of the stop,
//     not of itself, and must not be acked (a broker delivers it again).
//   - A panic, the handler's or hook's, is not caught: it is the handler's
//     panic, which the dispatcher recovers into *component.PanicError. A
//     panicking exchange is therefore never dead-lettered.
//
// hook runs inline, in the exchange's group: the next exchange of the group
// waits for it. A nil hook returns ErrInvalidOption. Cost on success: one
// call.
func DeadLetter[T any](hook func(ctx context.Context, exchange T, err error) error) (Middleware[T], error) {
	if hook == nil {
		return nil, fmt.Errorf("%w: DeadLetter: nil hook", ErrInvalidOption)
	}
	return wrap("DeadLetter", func(h dispatch.Handler[T]) dispatch.Handler[T] {
		return func(ctx context.Context, x T) error {
			err := h(ctx, x)
			if err == nil || ctx.Err() != nil {
				return err
			}
			if herr := hook(ctx, x, err); herr != nil {
				return errors.Join(err, fmt.Errorf("%w: %w", ErrDeadLetter, herr))
			}
			return nil
		}
	}), nil
}
