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

// Aside calls f on a goroutine of its own and waits for it to end. It
// returns f's panic (recovered there, with the panicking stack), or exited
// true when f ended its goroutine with runtime.Goexit, which no recover
// stops and which, run inline, would end the caller's goroutine with it.
// Costs a goroutine per call: for calls off the per-item path (discards,
// commits).
func Aside(f func()) (p *Error, exited bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		returned := false
		defer func() {
			if !returned {
				if v := recover(); v != nil {
					p = New(v)
				} else {
					exited = true
				}
			}
		}()
		f()
		returned = true
	}()
	<-done
	return p, exited
}
