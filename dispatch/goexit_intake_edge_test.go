package dispatch_test

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// goexitOnAdmitted is an Observer whose Admitted ends its goroutine with
// runtime.Goexit at the n-th call: what a test's t.FailNow does in it.
type goexitOnAdmitted struct {
	*countingObserver
	n     int64
	calls int64 // only the intake's goroutine calls Admitted here
}

func (o *goexitOnAdmitted) Admitted(ctx context.Context, l dispatch.Labels) {
	o.calls++
	if o.calls == o.n {
		runtime.Goexit()
	}
	o.countingObserver.Admitted(ctx, l)
}

// goexitID is an exchange whose AggregateID ends its goroutine when
// asked for the id "exit".
type goexitID struct{ id aggregate.ID }

func (x goexitID) AggregateID() aggregate.ID {
	if x.id.ID == "exit" {
		runtime.Goexit()
	}
	return x.id
}

// edgeStoppable is what the cases below look at of a Dispatcher or a
// MainDispatcher.
type edgeStoppable interface {
	Done() <-chan struct{}
	ForceStop()
	Stats() dispatch.Stats
	Err() error
}

// edgeWaitDone waits for c's Done within a minute of the bubble's time; it
// reports whether Done closed.
func edgeWaitDone(t *testing.T, c interface{ Done() <-chan struct{} }, what string) bool {
	t.Helper()
	select {
	case <-c.Done():
		return true
	case <-time.After(time.Minute):
		t.Errorf("%s: Done not closed a minute after the stop", what)
		return false
	}
}

// User code the intake calls on the source's goroutine (the Observer's
// Admitted, a key function, AggregateID) that ends it with runtime.Goexit
// leaves no exchange in flight: the source's end is an error, the exchange
// ends once (Received == Succeeded + Failed + Discarded) and Done closes.
func TestIntakeGoexitOnTheSourceGoroutineEndsTheExchange(t *testing.T) {
	xs := exchanges(5, 5)
	cases := map[string]func(t *testing.T) edgeStoppable{
		"Admitted": func(t *testing.T) edgeStoppable {
			obs := &goexitOnAdmitted{countingObserver: &countingObserver{}, n: 3}
			d, err := dispatch.New("orders", orders, flux.FromSlice(xs), testkit.Perform, quiet,
				dispatch.WithObserver(obs), dispatch.WithScheduler(schedulers.Immediate()))
			require.NoError(t, err)
			require.NoError(t, d.Prepare(t.Context()))
			require.NoError(t, d.Start())
			return d
		},
		"key function": func(t *testing.T) edgeStoppable {
			d, err := dispatch.NewKeyed("orders", orders, flux.FromSlice(xs), func(x testkit.Exchange) int {
				if x.ID.ID == xs[2].ID.ID {
					runtime.Goexit()
				}
				return 0
			}, testkit.Perform, quiet)
			require.NoError(t, err)
			require.NoError(t, d.Prepare(t.Context()))
			require.NoError(t, d.Start())
			return d
		},
		"AggregateID on a MainDispatcher": func(t *testing.T) edgeStoppable {
			sup, err := aggregate.NewSchedulerSupplier("main", aggregate.WithParallelism(2))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, sup.StopGracefully(context.Background())) })
			ys := []goexitID{{aggregate.NewID(orders, "a")}, {aggregate.NewID(orders, "exit")}, {aggregate.NewID(orders, "b")}}
			m, err := dispatch.NewMain("main", []aggregate.NamedAggregate{orders}, flux.FromSlice(ys),
				func(context.Context, goexitID) error { return nil }, sup, quietOf[goexitID]())
			require.NoError(t, err)
			require.NoError(t, m.Prepare(t.Context()))
			require.NoError(t, m.Start())
			return m
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := build(t)
				if !edgeWaitDone(t, d, "after the source's goroutine ended") {
					d.ForceStop()
					if !edgeWaitDone(t, d, "after ForceStop") {
						s := d.Stats()
						t.Fatalf("the exchange whose intake ended with Goexit stays in flight for ever: %+v", s)
					}
				}
				s := d.Stats()
				assert.Zero(t, s.InFlight, "%+v", s)
				assert.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded, "%+v", s)
				assert.ErrorIs(t, d.Err(), schedulers.ErrGoexit)
			})
		})
	}
}

// The same on Emit's caller: the Emit that its Observer's Admitted ended
// with runtime.Goexit leaves nothing in flight, so the dispatcher still
// stops gracefully and reaches Done.
func TestEmitGoexitInAdmittedLeavesTheDispatcherStoppable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &goexitOnAdmitted{countingObserver: &countingObserver{}, n: 2}
		d, err := dispatch.New[testkit.Exchange]("orders", orders, nil, testkit.Perform, quiet,
			dispatch.WithObserver(obs), dispatch.WithMaxPending(4))
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		xs := exchanges(3, 3)
		emitted := make(chan struct{})
		go func() {
			defer close(emitted)
			for _, x := range xs {
				assert.NoError(t, d.Emit(context.Background(), x))
			}
		}()
		<-emitted // the second Emit ended its goroutine
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = d.StopGracefully(ctx)
		if err != nil {
			t.Errorf("StopGracefully after an Emit ended with Goexit: %v (%+v)", err, d.Stats())
			d.ForceStop()
			if !edgeWaitDone(t, d, "after ForceStop") {
				t.Fatalf("an Emit ended with Goexit holds the dispatcher for ever: %+v", d.Stats())
			}
		}
		s := d.Stats()
		assert.Equal(t, dispatch.Stats{Received: 1, Succeeded: 1}, s, "the Emit cut short was not admitted")
		pending, _ := d.Budget()
		assert.Zero(t, pending, "the Emit cut short gave its budget unit back")
	})
}
