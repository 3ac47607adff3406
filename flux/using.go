package flux

import (
	"context"

	"github.com/aggflow/aggflow/component"
)

// Using makes a resource per subscription and streams from it: it calls
// resource, subscribes body(r), and calls cleanup(r) exactly once when that
// subscription ends, whatever the end (completion, error, cancellation, a
// panic of body or of the flow, a runtime.Goexit), after its last item and
// before the end reaches the operators after Using (eager cleanup). An
// error of resource is the error signal, with no cleanup (there is no
// resource); panics of resource and body become *PanicError (body's after
// cleanup); a panic in cleanup is joined to the end's error. Runs on the
// subscribing goroutine. Any function nil gives ErrInvalidArgument.
func Using[R, T any](resource func() (R, error), body func(R) Flux[T], cleanup func(R)) Flux[T] {
	switch {
	case resource == nil:
		return Error[T](invalid("Using", "nil resource function"))
	case body == nil:
		return Error[T](invalid("Using", "nil body function"))
	case cleanup == nil:
		return Error[T](invalid("Using", "nil cleanup function"))
	}
	return Flux[T]{subscribe: func(ctx context.Context, emit func(T) error) (err error) {
		r, err := acquire(resource)
		if err != nil {
			return err
		}
		defer func() { err = errorsJoin(err, callV(cleanup, r)) }()
		f, err := call1(body, r)
		if err != nil {
			return err
		}
		return f.run(ctx, emit)
	}}
}

// acquire calls resource, turning its panic into *PanicError.
func acquire[R any](resource func() (R, error)) (r R, err error) {
	defer component.Catch(&err)
	return resource()
}
