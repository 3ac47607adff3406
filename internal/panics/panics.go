// Package panics is what component exports for recovered panics, under the
// names the modules outside the root used before it existed; the root
// module uses component itself.
package panics

import "github.com/aggflow/aggflow/component"

// Error is component.PanicError.
type Error = component.PanicError

// New is component.NewPanicError: call it from the deferred function that
// recovered, so that the stack still shows the panicking frames.
func New(v any) *Error { return component.NewPanicError(v) }

// Aside is component.Aside: f on a goroutine of its own, its panic or
// runtime.Goexit reported.
func Aside(f func()) (p *Error, exited bool) { return component.Aside(f) }
