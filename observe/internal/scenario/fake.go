package scenario

import (
	"errors"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// Fake is a dispatcher of fixed gauges, or whose methods panic.
type Fake struct {
	ID     string // its Name
	Values adapter.Gauges
	// PanicIn names the method that panics: "Name", "Stats" or "Budget".
	PanicIn string
}

// ErrFake is what a Fake panics with.
var ErrFake = errors.New("scenario: fake dispatcher panicked")

func (f Fake) panicIn(method string) {
	if f.PanicIn == method {
		panic(ErrFake)
	}
}

// Name returns f.ID.
func (f Fake) Name() string { f.panicIn("Name"); return f.ID }

// Stats returns the in-flight count of f.Values.
func (f Fake) Stats() dispatch.Stats {
	f.panicIn("Stats")
	return dispatch.Stats{InFlight: f.Values.InFlight}
}

// Budget returns the budget of f.Values.
func (f Fake) Budget() (pending, max int64) {
	f.panicIn("Budget")
	return f.Values.Pending, f.Values.Limit
}
