package kafka

import "runtime/debug"

// recovered wraps a value returned by recover, with the stack of the
// panicking goroutine (call it from the deferred function).
func recovered(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }
