package prommetrics

import (
	"fmt"
	"unicode/utf8"

	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// Dispatcher is the interface the gauges read, of three methods: Name()
// string, Stats() dispatch.Stats and Budget() (pending, max int64). Every
// dispatcher type of package dispatch (Dispatcher, MainDispatcher) has them,
// and any other type with them may be registered.
type Dispatcher = adapter.Dispatcher

// Register makes the gauges report d, by its name, until Unregister: each
// Collect reads d.Stats() and d.Budget() (atomic loads). Name is read once,
// here. A nil d, or a Name that is empty, not valid UTF-8 or panics, returns
// ErrInvalidArgument; a name registered already, ErrDuplicate (one label
// set, one value). Safe for concurrent use, also with Collect.
func (c *Collector) Register(d Dispatcher) error {
	if d == nil {
		return fmt.Errorf("%w: nil dispatcher", ErrInvalidArgument)
	}
	name, err := adapter.NameOf(d)
	switch {
	case err != nil:
		return fmt.Errorf("%w: dispatcher's Name: %w", ErrInvalidArgument, err)
	case name == "" || !utf8.ValidString(name):
		return fmt.Errorf("%w: dispatcher name %q is empty or not UTF-8", ErrInvalidArgument, name)
	case !c.gauged.Add(name, d):
		return fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	return nil
}

// Unregister stops reporting the dispatcher registered under d's name, and
// says whether one was. The counters and histograms of its exchanges stay:
// they are cumulative.
func (c *Collector) Unregister(d Dispatcher) bool {
	if d == nil {
		return false
	}
	name, err := adapter.NameOf(d)
	return err == nil && c.gauged.Remove(name)
}
