package component_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/testkit"
)

var errIllegal = errors.New("test: illegal")

func newCore(final func()) *component.Lifecycle {
	c := new(component.Lifecycle)
	c.Init("thing", "t", errIllegal, final)
	return c
}

func TestForwardTransitions(t *testing.T) {
	c := newCore(nil)
	require.NoError(t, c.Step("prepare", component.StateNew))
	assert.ErrorContains(t, c.Step("prepare", component.StateNew), "while another step is in progress")
	assert.True(t, c.Advance(component.StateNew, component.StatePrepared))
	c.Leave()
	assert.Equal(t, component.StatePrepared, c.State())
	err := c.Enter("prepare", component.StateNew)
	require.ErrorIs(t, err, errIllegal)
	assert.EqualError(t, err, `test: illegal: thing "t" cannot prepare from state PREPARED`)
	assert.True(t, c.Advance(component.StatePrepared, component.StateRunning))
	from, first := c.Quiesce()
	assert.Equal(t, component.StateRunning, from)
	assert.True(t, first)
	_, first = c.Quiesce()
	assert.False(t, first)
	assert.False(t, testkit.Closed(c.Done()))
	c.Stop()
	assert.True(t, testkit.Closed(c.Stopped()))
	assert.True(t, testkit.Closed(c.Done()))
	assert.Equal(t, "STOPPED", c.State().String())
	assert.Equal(t, "State(9)", component.State(9).String())
}

func TestDoneWaitsForHoldsAndFinalizes(t *testing.T) {
	finals := 0
	c := newCore(func() { finals++ })
	require.True(t, c.Hold())
	c.Stop()
	assert.True(t, testkit.Closed(c.Stopped()), "the logical end does not wait for holds")
	assert.False(t, testkit.Closed(c.Done()), "the physical end does")
	assert.Equal(t, 0, finals)
	c.Release()
	assert.True(t, testkit.Closed(c.Done()))
	assert.Equal(t, 1, finals)
	assert.False(t, c.Hold(), "no hold after the physical end")
}

func TestForceDuringEnterRefusesAdvance(t *testing.T) {
	c := newCore(nil)
	require.NoError(t, c.Step("prepare", component.StateNew))
	from, first := c.Force()
	assert.Equal(t, component.StateNew, from)
	assert.True(t, first)
	assert.False(t, c.Advance(component.StateNew, component.StatePrepared), "a force taken over a prepare")
	assert.False(t, testkit.Closed(c.Done()), "Done waits for the prepare to leave")
	c.Leave()
	assert.True(t, testkit.Closed(c.Done()))
	_, first = c.Force()
	assert.False(t, first)
	assert.True(t, c.Forced())
}

func TestRecordKeepsTheFirst(t *testing.T) {
	c := newCore(nil)
	c.Record(nil)
	c.Record(errors.New("first"))
	c.Record(errors.New("second"))
	assert.EqualError(t, c.Err(), "first")
}

func TestAwait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCore(nil)
		c.Record(errors.New("boom"))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := c.Await(ctx, func(err error) error { return errors.Join(errors.New("still running"), err) })
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, "still running")
		go func() {
			time.Sleep(time.Minute)
			c.Stop()
		}()
		assert.EqualError(t, c.Await(t.Context(), nil), "boom")
	})
}

// TestConcurrentStops: from several goroutines, any mix of Quiesce, Force,
// Stop, Hold/Release and Enter/Advance ends with Done closed exactly once,
// the finalizer run once, and the state STOPPED.
func TestConcurrentStops(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		finals := 0
		var mu sync.Mutex
		c := newCore(func() { mu.Lock(); finals++; mu.Unlock() })
		ops := rapid.SliceOfN(rapid.IntRange(0, 4), 1, 12).Draw(rt, "ops")
		var wg sync.WaitGroup
		for _, op := range ops {
			wg.Go(func() {
				switch op {
				case 0:
					c.Quiesce()
				case 1:
					c.Force()
				case 2:
					c.Stop()
				case 3:
					if c.Hold() {
						c.Release()
					}
				case 4:
					if c.Step("prepare", component.StateNew) == nil {
						c.Advance(component.StateNew, component.StatePrepared)
						c.Leave()
					}
				}
			})
		}
		wg.Wait()
		c.Stop()
		<-c.Done()
		mu.Lock()
		defer mu.Unlock()
		if finals != 1 {
			rt.Fatalf("finalizer ran %d times", finals)
		}
		if c.State() != component.StateStopped {
			rt.Fatalf("state %v", c.State())
		}
	})
}
