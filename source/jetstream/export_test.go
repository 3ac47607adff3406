package jetstream

import "time"

// WithoutReset is the control of the tests: the consumer resumes as the
// server redelivers (no reset to the ack floor on Start), and takes a
// redelivered position below the last one as it comes.
func WithoutReset() Option { return func(c *config) { c.noReset = true } }

// WithoutFence is the control of the fence: the leases never lapse by the
// owner's clock, a lease taken by another member and a refused pull are
// ignored, so a stalled owner goes on handling and acknowledging.
func WithoutFence() Option { return func(c *config) { c.noFence = true } }

// WithRacingPulls gives every pull a client deadline at its expiry, as the
// consumer did before the pulls expired on the server only: a message that
// arrives as the deadline passes (a process paused across it) is dropped,
// so that the resets have holes to repair.
func WithRacingPulls() Option { return func(c *config) { c.racingPull = true } }

// LeaseBucket is the name of the lease bucket of a durable prefix.
var LeaseBucket = leaseBucket

// ParseLease reads a lease's value: its member and epoch.
var ParseLease = parseLease

// Plan and FairShare are the balance's pure functions.
var (
	Plan      = plan
	FairShare = fairShare
)

// SetPullExpiry sets the pulls' server-side expiry (default 5 s), before
// any consumer runs: the tests that pause a process across an expiry
// shorten it.
func SetPullExpiry(d time.Duration) { pullExpiry = d }

// WithOpenFault makes the open of a claimed partition fail with what fault
// returns for it (nil: no fault), as a server too slow to answer the reset
// in time does.
func WithOpenFault(fault func(p int32) error) Option {
	return func(c *config) { c.openFault = fault }
}
