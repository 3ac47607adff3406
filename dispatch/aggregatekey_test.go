package dispatch_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// keyCalls counts the calls of a keyedExchange's two id methods.
type keyCalls struct{ id, key atomic.Int64 }

// keyedExchange holds its id as an aggregate.Key; AggregateKey panics for
// the id "panic".
type keyedExchange struct {
	key   aggregate.Key
	seq   int
	calls *keyCalls
}

func (x keyedExchange) AggregateID() aggregate.ID {
	x.calls.id.Add(1)
	return aggregate.NewID(orders, x.key.ID())
}

func (x keyedExchange) AggregateKey() aggregate.Key {
	x.calls.key.Add(1)
	if x.key.ID() == "panic" {
		panic("no key")
	}
	return x.key
}

// keyedCommand is an interface exchange type with both id methods.
type keyedCommand interface {
	aggregate.IDCapable
	aggregate.KeyCapable
}

func keyedExchanges(n, ids int, calls *keyCalls) []keyedExchange {
	xs := make([]keyedExchange, n)
	for i := range xs {
		xs[i] = keyedExchange{key: aggregate.NewKey("k" + strconv.Itoa(i%ids)), seq: i / ids, calls: calls}
	}
	return xs
}

// With WithAggregateKey, an exchange type that also implements
// aggregate.KeyCapable is routed by its key, by value, by pointer or as an interface, from a source, Emit and
// EmitBatch, in group and key order: every exchange is in the group
// AggregateID().Mod gives, each id's exchanges run in order, AggregateKey
// is called once per exchange and AggregateID never.
func TestNewRoutesByAggregateKey(t *testing.T) {
	for _, way := range []string{"source", "Emit", "EmitBatch"} {
		for _, perKey := range []bool{false, true} {
			name := way + "/group"
			if perKey {
				name = way + "/key"
			}
			t.Run(name+"/value", func(t *testing.T) {
				routesByKey(t, way, perKey, func(x keyedExchange) keyedExchange { return x },
					func(x keyedExchange) keyedExchange { return x })
			})
			t.Run(name+"/pointer", func(t *testing.T) {
				routesByKey(t, way, perKey, func(x keyedExchange) *keyedExchange { return &x },
					func(x *keyedExchange) keyedExchange { return *x })
			})
			t.Run(name+"/interface", func(t *testing.T) {
				routesByKey(t, way, perKey, func(x keyedExchange) keyedCommand { return x },
					func(x keyedCommand) keyedExchange { return x.(keyedExchange) })
			})
		}
	}
}

func routesByKey[T aggregate.IDCapable](t *testing.T, way string, perKey bool,
	wrap func(keyedExchange) T, unwrap func(T) keyedExchange) {
	const n, ids, groups = 600, 37, 16
	var calls keyCalls
	var xs []T
	for _, x := range keyedExchanges(n, ids, &calls) {
		xs = append(xs, wrap(x))
	}
	var mu sync.Mutex
	next := map[string]int{}
	var misrouted, disordered int
	handler := func(_ context.Context, x T) error {
		kx := unwrap(x)
		mu.Lock()
		defer mu.Unlock()
		if kx.seq != next[kx.key.ID()] {
			disordered++
		}
		next[kx.key.ID()] = kx.seq + 1
		return nil
	}
	hook := dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[T]) {
		if r.Group != aggregate.GroupKey(unwrap(r.Exchange).key.ID(), groups) {
			mu.Lock()
			misrouted++
			mu.Unlock()
		}
	})
	opts := []dispatch.Option[T]{dispatch.WithParallelism(groups), dispatch.WithAggregateKey(), hook}
	if perKey {
		opts = append(opts, dispatch.WithKeyOrdering())
	}
	switch way {
	case "source":
		d, err := dispatch.New("orders", orders, flux.FromSlice(xs), handler, append(opts, quietOf[T]())...)
		require.NoError(t, err)
		require.NoError(t, d.Run(t.Context()))
		assert.Equal(t, dispatch.Stats{Received: n, Succeeded: n}, d.Stats())
	default:
		d := started(t, nil, handler, opts...)
		if way == "Emit" {
			for _, x := range xs {
				require.NoError(t, d.Emit(t.Context(), x))
			}
		} else {
			for i := 0; i < n; i += 50 {
				m, err := d.EmitBatch(t.Context(), xs[i:i+50])
				require.NoError(t, err)
				require.Equal(t, 50, m)
			}
		}
		require.NoError(t, d.StopGracefully(t.Context()))
		assert.Equal(t, dispatch.Stats{Received: n, Succeeded: n}, d.Stats())
	}
	assert.Zero(t, misrouted, "exchanges outside AggregateID().Mod's group")
	assert.Zero(t, disordered, "exchanges out of their id's order")
	assert.Equal(t, int64(n), calls.key.Load(), "AggregateKey calls")
	assert.Zero(t, calls.id.Load(), "AggregateID calls")
}

// An empty key fails its exchange alone with ErrInvalidGroupKey, and so does
// a panicking AggregateKey, named in the error; the others go on.
func TestAggregateKeyFailuresFailAlone(t *testing.T) {
	var calls keyCalls
	xs := []keyedExchange{{calls: &calls}, {key: aggregate.NewKey("panic"), calls: &calls},
		{key: aggregate.NewKey("a"), calls: &calls}}
	var mu sync.Mutex
	var failures []error
	hook := dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[keyedExchange]) {
		if r.Err != nil {
			mu.Lock()
			failures = append(failures, r.Err)
			mu.Unlock()
		}
	})
	d, err := dispatch.New("orders", orders, flux.FromSlice(xs), func(context.Context, keyedExchange) error { return nil },
		quietOf[keyedExchange](), dispatch.WithAggregateKey(), hook)
	require.NoError(t, err)
	require.NoError(t, d.Run(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 3, Succeeded: 1, Failed: 2}, d.Stats())
	require.Len(t, failures, 2)
	for _, err := range failures {
		assert.ErrorIs(t, err, dispatch.ErrInvalidGroupKey)
	}
	assert.ErrorContains(t, failures[0], "empty aggregate id")
	assert.ErrorContains(t, failures[1], "AggregateKey panicked")
}

// Without WithAggregateKey, a KeyCapable exchange is routed by AggregateID;
// WithAggregateKey for an exchange type without the method, or given to
// NewKeyed or NewMain, is an invalid option naming it.
func TestWithAggregateKeyIsChosen(t *testing.T) {
	var calls keyCalls
	d, err := dispatch.New("orders", orders, flux.FromSlice(keyedExchanges(10, 3, &calls)),
		func(context.Context, keyedExchange) error { return nil }, quietOf[keyedExchange]())
	require.NoError(t, err)
	require.NoError(t, d.Run(t.Context()))
	assert.Equal(t, int64(10), calls.id.Load(), "AggregateID calls")
	assert.Zero(t, calls.key.Load(), "AggregateKey calls")

	noop := func(context.Context, pointerKeyed) error { return nil }
	_, err = dispatch.New("orders", orders, nil, noop, dispatch.WithAggregateKey())
	assert.ErrorIs(t, err, dispatch.ErrInvalidOption)
	assert.ErrorContains(t, err, "WithAggregateKey: dispatch_test.pointerKeyed has no method AggregateKey() aggregate.Key")
	_, err = dispatch.NewKeyed("orders", orders, nil, func(keyedExchange) int { return 0 },
		func(context.Context, keyedExchange) error { return nil }, dispatch.WithAggregateKey())
	assert.ErrorIs(t, err, dispatch.ErrInvalidOption)
	assert.ErrorContains(t, err, "WithAggregateKey is New's")
	_, err = dispatch.NewMain("events", []aggregate.NamedAggregate{orders}, nil,
		func(context.Context, keyedExchange) error { return nil }, &fakeSupplier{log: &callLog{}}, dispatch.WithAggregateKey())
	assert.ErrorIs(t, err, dispatch.ErrInvalidOption)
	assert.ErrorContains(t, err, "WithAggregateKey is New's")
}

// pointerKeyed has AggregateKey on its pointer only: a pointerKeyed value
// is not KeyCapable.
type pointerKeyed struct{ key aggregate.Key }

func (x pointerKeyed) AggregateID() aggregate.ID    { return aggregate.NewID(orders, x.key.ID()) }
func (x *pointerKeyed) AggregateKey() aggregate.Key { return x.key }
