// Package testkit holds the checks aggflow's own tests use and users' tests can
// reuse: Verify, a step verifier for flux.Flux, a handler Recorder with
// ordering and no-loss checkers, property-test generators of workloads, slog
// handlers for tests of code that logs (LogCapture keeps the records,
// LogGoexit and LogPanic misbehave as a user's logger may), and Closed, a
// non-blocking check of a Done channel.
//
// Nothing in the library imports testkit. Verify depends only on the
// standard library, flux and testing, and runs inside testing/synctest
// bubbles (its default timeout then runs on the bubble's virtual clock, so a
// stalled flow fails at once instead of hanging).
package testkit
