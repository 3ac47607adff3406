package schedulers_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBoundedElasticValidates(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := schedulers.NewBoundedElastic("e", 1, schedulers.WithTTL(d))
		assert.ErrorIs(t, err, schedulers.ErrInvalidOption, "ttl %v", d)
		assert.ErrorContains(t, err, "schedulers: ")
		assert.ErrorContains(t, err, `"e"`, "the error names the scheduler")
	}
	_, err := schedulers.NewParallel("p", 1, schedulers.WithTTL(time.Second))
	assert.ErrorIs(t, err, schedulers.ErrInvalidOption, "a parallel scheduler's goroutines do not retire")
	_, err = schedulers.NewSingle("p", schedulers.WithTTL(time.Second))
	assert.ErrorIs(t, err, schedulers.ErrInvalidOption)
	_, err = schedulers.NewBoundedElastic("e", 0)
	assert.ErrorIs(t, err, schedulers.ErrInvalidParallelism)
	_, err = schedulers.NewBoundedElastic("", 1)
	assert.ErrorIs(t, err, schedulers.ErrInvalidName)

	s := newElastic(t, "io", 8, schedulers.WithTTL(1500*time.Millisecond))
	assert.Equal(t, `boundedElastic("io",maxGoroutines=8,ttl=1.5s)`, s.String())
	assert.Equal(t, `boundedElastic("io",maxGoroutines=8,ttl=1m0s)`, newElastic(t, "io", 8).String())
}

func TestBoundedElasticGrowsOnDemandUpToItsCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newElastic(t, "grow", 4)
		assert.Zero(t, s.Goroutines(), "the constructor starts none")
		var g gauge
		release := make(chan struct{})
		require.NoError(t, s.Schedule(blocking(&g, release)))
		synctest.Wait()
		assert.Equal(t, 1, s.Goroutines(), "one goroutine per task that found none idle")

		for range 9 {
			require.NoError(t, s.Schedule(blocking(&g, release)))
		}
		synctest.Wait()
		assert.Equal(t, 4, s.Goroutines(), "never more than the cap")
		assert.EqualValues(t, 4, g.now.Load())

		close(release)
		drain(t, s)
		assert.EqualValues(t, 10, g.started.Load(), "the tasks queued while all were busy ran")
		assert.EqualValues(t, 4, g.peak.Load())
		assert.Zero(t, s.Goroutines())
	})
}

func TestBoundedElasticRunsTasksQueuedWhileAllAreBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newElastic(t, "queued", 2)
		release := make(chan struct{})
		var g gauge
		require.NoError(t, s.Schedule(blocking(&g, release)))
		w := newWorker(t, s)
		require.NoError(t, w.Schedule(blocking(&g, release)))
		synctest.Wait()
		require.Equal(t, 2, s.Goroutines(), "both busy")
		var ran counter
		var order recorder
		for i := range 50 {
			require.NoError(t, s.Schedule(ran.task))
			require.NoError(t, w.Schedule(func(context.Context) { order.add(i) }))
		}
		synctest.Wait()
		assert.Zero(t, ran.get(), "queued behind two busy goroutines")
		release <- struct{}{} // one goroutine comes free and drains the queue
		synctest.Wait()
		assert.Equal(t, 50, ran.get())
		assert.Equal(t, 2, s.Goroutines())
		close(release)
		drain(t, s)
		assert.Len(t, order.snapshot(), 50)
		for i, v := range order.snapshot() {
			require.Equal(t, i, v, "the worker's tasks ran in order")
		}
	})
}

func TestBoundedElasticIdleGoroutinesRetireAfterTheTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Second
		s := newElastic(t, "retire", 4, schedulers.WithTTL(ttl))
		first, second := make(chan struct{}), make(chan struct{})
		var g gauge
		for range 2 {
			require.NoError(t, s.Schedule(blocking(&g, first)))
			require.NoError(t, s.Schedule(blocking(&g, second)))
		}
		synctest.Wait()
		require.Equal(t, 4, s.Goroutines())

		close(first) // two go idle now, two at +4s
		time.Sleep(4 * time.Second)
		close(second)
		synctest.Wait()
		time.Sleep(ttl - 4*time.Second - time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, 4, s.Goroutines(), "none idle for the TTL yet")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		assert.Equal(t, 2, s.Goroutines(), "the first two retired one TTL after they went idle")
		time.Sleep(4 * time.Second)
		synctest.Wait()
		assert.Zero(t, s.Goroutines(), "all retired")
		assert.False(t, s.IsDisposed())
		assert.False(t, testkit.Closed(s.Done()), "retiring is not terminating")

		var ran counter
		require.NoError(t, s.Schedule(ran.task))
		synctest.Wait()
		assert.Equal(t, 1, ran.get(), "a new goroutine serves")
		assert.Equal(t, 1, s.Goroutines())
		drain(t, s)
	})
}

// A goroutine that keeps getting work before its TTL passes stays: the TTL
// counts from the moment it went idle, not from its start.
func TestBoundedElasticBusyGoroutineDoesNotRetire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		s := newElastic(t, "busy", 1, schedulers.WithTTL(ttl))
		seen := make(chan context.Context, 100)
		for range 100 {
			require.NoError(t, s.Schedule(func(ctx context.Context) { seen <- ctx }))
			synctest.Wait()
			time.Sleep(ttl / 2)
		}
		assert.Equal(t, 1, s.Goroutines(), "50 TTLs passed, never one idle")
		drain(t, s)
		close(seen)
		first := <-seen
		for ctx := range seen {
			assert.Equal(t, first, ctx, "one goroutine's context served every task")
		}
	})
}

func TestParallelGoroutinesNeverRetire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newParallel(t, "stay", 3)
		release := make(chan struct{})
		var g gauge
		for range 3 {
			require.NoError(t, s.Schedule(blocking(&g, release)))
		}
		synctest.Wait()
		close(release)
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		assert.Equal(t, 3, s.Goroutines())
		drain(t, s)
		assert.Zero(t, s.Goroutines())
	})
}

// Disposal with goroutines that are idle, their TTL pending: they exit at
// once, and so does Done close.
func TestBoundedElasticDisposeWithIdleGoroutines(t *testing.T) {
	for _, force := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			s := newElastic(t, "idle", 3)
			var ran counter
			for range 3 {
				require.NoError(t, s.Schedule(ran.task))
			}
			synctest.Wait()
			start := time.Now()
			if force {
				s.Dispose()
				<-s.Done()
			} else {
				drain(t, s)
			}
			assert.Zero(t, time.Since(start), "nobody waited for a TTL")
			assert.Zero(t, s.Goroutines())
			assert.Equal(t, 3, ran.get())
		})
	}
}
