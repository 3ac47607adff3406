package scenario

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// Instance is one adapter under test, fresh for each test.
type Instance struct {
	// Observer is the adapter as dispatchers see it.
	Observer dispatch.Observer
	// Register registers d with the adapter's gauges; unregister undoes it.
	Register func(d adapter.Dispatcher) (unregister func() error, err error)
	// Collect reads the metrics in the model's terms, with the error of the
	// collection.
	Collect func(t require.TestingT) (Got, error)
}

// Adapter is an adapter as Suite tests it.
type Adapter struct {
	// New returns an Instance whose handling histogram has the given
	// bounds, or the default ones when bounds is nil.
	New func(t require.TestingT, bounds []float64) Instance
	// The adapter's sentinels, and the prefix of its error messages.
	ErrInvalidArgument, ErrDuplicate error
	Prefix                           string
}

// Suite runs the tests every adapter must pass: real dispatchers, the model
// of random events, concurrent events, registrations, and panics of
// registered dispatchers.
func Suite(t *testing.T, a Adapter) {
	t.Run("Dispatchers", a.dispatchers)
	t.Run("MatchesModel", a.matchesModel)
	t.Run("ConcurrentEvents", a.concurrentEvents)
	t.Run("UnknownOutcome", a.unknownOutcome)
	t.Run("RegisterOneNameOnce", a.registerOneNameOnce)
	t.Run("RegisterRefusesInvalid", a.registerRefusesInvalid)
	t.Run("CollectRecoversPanics", a.collectRecoversPanics)
}

func mustCollect(t require.TestingT, inst Instance) Got {
	got, err := inst.Collect(t)
	require.NoError(t, err)
	return got
}

// Real dispatchers (Run): every count, histogram and gauge is what the
// exchanges imply; unregistered dispatchers are read no more.
func (a Adapter) dispatchers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inst := a.New(t, nil)
		var unregister []func() error
		want := Run(t, Hooks{
			Observer: inst.Observer,
			Register: func(d adapter.Dispatcher) {
				undo, err := inst.Register(d)
				require.NoError(t, err)
				unregister = append(unregister, undo)
			},
			Blocked: func(blocked adapter.Gauges) {
				require.Equal(t, map[string]adapter.Gauges{MainName: {Limit: MaxPending}, ForcedName: blocked},
					mustCollect(t, inst).Gauges)
			},
		})
		Check(t, want, mustCollect(t, inst), adapter.DefaultBuckets())
		for _, undo := range unregister {
			require.NoError(t, undo())
		}
		require.Empty(t, mustCollect(t, inst).Gauges, "unregistered dispatchers are not read")
	})
}

// Any sequence of events shows as the model says, with the default and
// with drawn buckets.
func (a Adapter) matchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var bounds []float64
		if rapid.Bool().Draw(t, "custom buckets") {
			bounds = Bounds().Draw(t, "bounds")
		}
		inst := a.New(t, bounds)
		if bounds == nil {
			bounds = adapter.DefaultBuckets()
		}
		want := Apply(inst.Observer, Events(bounds).Draw(t, "events"))
		Check(t, want, mustCollect(t, inst), bounds)
	})
}

// Many goroutines observing the same label sets at once lose nothing.
func (a Adapter) concurrentEvents(t *testing.T) {
	inst := a.New(t, nil)
	const goroutines = 8
	wants := make([]Want, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() { wants[i] = Apply(inst.Observer, AllEvents()) })
	}
	wg.Wait()
	Check(t, Merge(wants...), mustCollect(t, inst), adapter.DefaultBuckets())
}

// An outcome newer than the adapter is labelled by its String, uncached.
func (a Adapter) unknownOutcome(t *testing.T) {
	inst := a.New(t, nil)
	unknown := dispatch.OutcomeDiscarded + 1
	want := Apply(inst.Observer, []Event{
		{Kind: Finished, Labels: labelChoices[0], Outcome: unknown, Took: 1500},
		{Kind: Finished, Labels: labelChoices[0], Outcome: unknown, Took: 2500},
	})
	require.Equal(t, map[Key]int64{KeyOf(labelChoices[0], unknown.String()): 2}, want.Exchanges)
	Check(t, want, mustCollect(t, inst), adapter.DefaultBuckets())
}

// One name is registered once; unregistering frees it, once.
func (a Adapter) registerOneNameOnce(t *testing.T) {
	inst := a.New(t, nil)
	undo, err := inst.Register(Fake{ID: "d", Values: adapter.Gauges{InFlight: 1, Pending: 2, Limit: 3}})
	require.NoError(t, err)
	_, err = inst.Register(Fake{ID: "d"})
	require.ErrorIs(t, err, a.ErrDuplicate)
	require.ErrorContains(t, err, a.Prefix)
	require.Equal(t, map[string]adapter.Gauges{"d": {InFlight: 1, Pending: 2, Limit: 3}}, mustCollect(t, inst).Gauges)

	require.NoError(t, undo())
	undo, err = inst.Register(Fake{ID: "d", Values: adapter.Gauges{Limit: 4}})
	require.NoError(t, err)
	require.Equal(t, map[string]adapter.Gauges{"d": {Limit: 4}}, mustCollect(t, inst).Gauges)
	require.NoError(t, undo())
}

// A nil dispatcher, an empty name or a Name that panics is an invalid
// argument; the panic is a *PanicError.
func (a Adapter) registerRefusesInvalid(t *testing.T) {
	inst := a.New(t, nil)
	for _, d := range []adapter.Dispatcher{nil, Fake{}, Fake{ID: "d", PanicIn: "Name"}} {
		_, err := inst.Register(d)
		require.ErrorIs(t, err, a.ErrInvalidArgument)
		require.ErrorContains(t, err, a.Prefix)
	}
	_, err := inst.Register(Fake{ID: "d", PanicIn: "Name"})
	var p *dispatch.PanicError
	require.ErrorAs(t, err, &p)
	require.ErrorIs(t, err, ErrFake)
	require.Empty(t, mustCollect(t, inst).Gauges)
}

// A dispatcher whose methods panic fails the collection with a
// *PanicError that names it; the others are still read.
func (a Adapter) collectRecoversPanics(t *testing.T) {
	for _, method := range []string{"Stats", "Budget"} {
		t.Run(method, func(t *testing.T) {
			inst := a.New(t, nil)
			_, err := inst.Register(Fake{ID: "broken", PanicIn: method})
			require.NoError(t, err)
			_, err = inst.Register(Fake{ID: "fine", Values: adapter.Gauges{Limit: 5}})
			require.NoError(t, err)
			got, err := inst.Collect(t)
			var p *dispatch.PanicError
			require.ErrorAs(t, err, &p)
			require.True(t, errors.Is(err, ErrFake))
			require.ErrorContains(t, err, a.Prefix+`reading dispatcher "broken"`)
			require.Equal(t, map[string]adapter.Gauges{"fine": {Limit: 5}}, got.Gauges)
		})
	}
}
