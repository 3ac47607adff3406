package dispatch

import "github.com/aggflow/aggflow/component"

// The lifecycle toolkit moved to package component; these names keep the
// modules that use them compiling until they switch.

// Lifecycle is component.Lifecycle.
//
// Deprecated: use component.Lifecycle.
type Lifecycle = component.Lifecycle

// State is component.State.
//
// Deprecated: use component.State.
type State = component.State

// The states.
//
// Deprecated: use component.StateNew, StatePrepared, StateRunning,
// StateStopping and StateStopped.
const (
	StateNew      = component.StateNew
	StatePrepared = component.StatePrepared
	StateRunning  = component.StateRunning
	StateStopping = component.StateStopping
	StateStopped  = component.StateStopped
)

// Component is component.Component.
//
// Deprecated: use component.Component.
type Component = component.Component

// Runtime is component.Runtime.
//
// Deprecated: use component.Runtime.
type Runtime = component.Runtime

// NewRuntime is component.NewRuntime.
//
// Deprecated: use component.NewRuntime.
var NewRuntime = component.NewRuntime

// WithShutdownTimeout is component.WithShutdownTimeout.
//
// Deprecated: use component.WithShutdownTimeout.
var WithShutdownTimeout = component.WithShutdownTimeout

// WithOwned is component.WithOwned.
//
// Deprecated: use component.WithOwned.
var WithOwned = component.WithOwned
