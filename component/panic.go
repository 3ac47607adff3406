package component

import (
	"fmt"
	"runtime/debug"
)

// PanicError is a recovered panic of user code: the value passed to panic
// and the stack of the goroutine at the point of the panic. A call of
// runtime.Goexit is reported as a PanicError whose Value is ErrGoexit.
// schedulers, flux and dispatch alias it as their PanicError, so one
// errors.As target matches a panic from any layer.
type PanicError struct {
	Value any
	Stack []byte
}

// NewPanicError wraps v, a value returned by recover, with the current
// stack. Call it from the deferred function that recovered, so that the
// stack still shows the panicking frames.
func NewPanicError(v any) *PanicError {
	return &PanicError{Value: v, Stack: debug.Stack()}
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is sees
// through panic(err) (and through a Goexit, to ErrGoexit).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
