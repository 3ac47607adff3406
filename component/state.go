package component

import "fmt"

// State is a lifecycle state: NEW -> PREPARED -> RUNNING -> STOPPING ->
// STOPPED. States only move forward: there is no restart.
type State int32

const (
	// StateNew is the state after construction: nothing subscribed, no
	// goroutine.
	StateNew State = iota
	// StatePrepared is the state after Prepare: resources resolved, nothing
	// pulled from the source yet.
	StatePrepared
	// StateRunning is the state after Start: work flows.
	StateRunning
	// StateStopping is the state after Quiesce: intake closed, admitted
	// work draining.
	StateStopping
	// StateStopped is the logical end: nothing more is admitted or handled.
	// Done closes once, in addition, every goroutine owned has exited.
	StateStopped
)

var stateNames = [...]string{"NEW", "PREPARED", "RUNNING", "STOPPING", "STOPPED"}

// String returns the upper-case name of the state ("RUNNING").
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int32(s))
}
