// Package component is the toolkit of aggflow's long-lived handles: the
// lifecycle every one embeds (State, Lifecycle), the contract they keep
// (Component, Resource), the Runtime that runs them as one unit, the
// one-call form (Run), and the one guard around user code
// (Call, Catch, RecoverAt, Go, Lifecycle.Call, Lifecycle.Go, Aside,
// GuardLogger), which tells a panic (*PanicError) from a runtime.Goexit
// (ErrGoexit).
//
// It sits below every other package of the module (schedulers, aggregate,
// flux, dispatch, partition) and imports none of them, so that each can use
// it, and a component of another module (a broker binding, a user's own)
// holds the same Lifecycle as the dispatchers do.
//
// Nowhere else does the module start a goroutine or recover: a goroutine is
// started with Lifecycle.Go (held, guarded, recorded, released) or, when no
// Lifecycle owns it, Go; user code runs inline under Call, or, on a per-item
// path, under a deferred Catch or RecoverAt (open-coded, no closure). A test parses the module's source and fails on a
// bare go statement or a recover outside this package, internal/ and the
// scheduler's runner.
package component
