// Package panics turns a recovered panic into an error value that every aggflow
// package reports the same way: schedulers, flux and dispatch alias Error as
// PanicError, so one errors.As target matches a panic from any layer.
package panics

import (
	"fmt"
	"runtime/debug"
)

// Error is a recovered panic: the value passed to panic and the stack of the
// goroutine at the point of the panic.
type Error struct {
	Value any
	Stack []byte
}

// New wraps a value returned by recover, capturing the current stack. Call it
// from the deferred function that recovered, so that the stack still shows the
// panicking frames.
func New(v any) *Error {
	return &Error{Value: v, Stack: debug.Stack()}
}

func (e *Error) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so errors.Is sees through
// panic(err).
func (e *Error) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
