package adapter

import (
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
)

// Dispatcher is what the gauges read: every dispatcher type of package
// dispatch has these methods.
type Dispatcher interface {
	Name() string
	Stats() dispatch.Stats
	Budget() (pending, max int64)
}

// Gauges are the values a dispatcher's gauges report, in exchanges.
type Gauges struct {
	InFlight, Pending, Limit int64
}

// Read reads d's gauges. d may be any user type: a panic of its methods is
// recovered into a *component.PanicError (dispatch.PanicError).
func Read(d Dispatcher) (g Gauges, err error) {
	err = protect(func() {
		g.InFlight = d.Stats().InFlight
		g.Pending, g.Limit = d.Budget()
	})
	return g, err
}

// NameOf returns d.Name(), recovering its panic as Read does.
func NameOf(d Dispatcher) (name string, err error) {
	err = protect(func() { name = d.Name() })
	return name, err
}

// protect runs f and returns its panic as a *component.PanicError.
func protect(f func()) error { return component.Call(func() error { f(); return nil }, nil) }
