package adapter_test

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/observe/internal/adapter"
)

// Concurrent Gets of the same Labels see one value each, whoever built it.
func TestCacheOneValuePerLabels(t *testing.T) {
	var built atomic.Int64
	c := adapter.NewCache(func(l dispatch.Labels) *string {
		built.Add(1)
		s := l.Dispatcher + "/" + l.Aggregate.String()
		return &s
	})
	labels := []dispatch.Labels{{Dispatcher: "a"}, {Dispatcher: "b"},
		{Dispatcher: "a", Aggregate: aggregate.MaterializedNamedAggregate{Context: "c", Aggregate: "x"}}}
	const goroutines = 8
	seen := make([][]*string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for _, l := range labels {
				seen[g] = append(seen[g], c.Get(l))
			}
		})
	}
	wg.Wait()
	for g := range goroutines {
		require.Equal(t, seen[0], seen[g], "goroutine %d got another value", g)
	}
	require.Equal(t, "a/c.x", *seen[0][2])
	require.Equal(t, len(labels), c.Len())
	require.GreaterOrEqual(t, built.Load(), int64(len(labels)))
}

// A cache is a map: any sequence of Gets returns what build made for
// those Labels the first time.
func TestCacheIsAMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := 0
		c := adapter.NewCache(func(dispatch.Labels) int { n++; return n })
		model := map[dispatch.Labels]int{}
		for _, name := range rapid.SliceOf(rapid.SampledFrom([]string{"a", "b", "c", "d"})).Draw(t, "gets") {
			l := dispatch.Labels{Dispatcher: name}
			v := c.Get(l)
			if _, ok := model[l]; !ok {
				model[l] = v
			}
			require.Equal(t, model[l], v)
		}
		require.Equal(t, len(model), c.Len())
	})
}

func TestRegistry(t *testing.T) {
	var r adapter.Registry[int]
	require.Empty(t, r.All())
	require.True(t, r.Add("b", 2))
	require.True(t, r.Add("a", 1))
	require.False(t, r.Add("a", 3), "one name once")
	require.Equal(t, []adapter.Entry[int]{{Name: "a", Value: 1}, {Name: "b", Value: 2}}, r.All(), "sorted by name")
	require.True(t, r.Remove("a"))
	require.False(t, r.Remove("a"))
	require.True(t, r.Add("a", 3))
	require.Equal(t, []adapter.Entry[int]{{Name: "a", Value: 3}, {Name: "b", Value: 2}}, r.All())
}

func TestDefaultBucketsIsACopy(t *testing.T) {
	b := adapter.DefaultBuckets()
	require.Len(t, b, 19)
	require.IsIncreasing(t, b)
	b[0] = -1
	require.NotEqual(t, b, adapter.DefaultBuckets())
}

func TestConfig(t *testing.T) {
	type option func(*adapter.Config)
	c := adapter.NewConfig("ns", []option{nil, func(c *adapter.Config) {
		c.SetBuckets(&c.Handling, "handling", []float64{1, 2})
		c.SetBuckets(&c.QueueWait, "wait", []float64{2, 1})
		c.Reject("bad %d", 7)
	}})
	require.Equal(t, "ns", c.Namespace)
	require.Equal(t, []float64{1, 2}, c.Handling)
	require.Equal(t, adapter.DefaultBuckets(), c.QueueWait, "an invalid option changes nothing")
	sentinel := errors.New("x: invalid option")
	err := c.Err(sentinel)
	require.ErrorIs(t, err, sentinel)
	require.ErrorContains(t, err, "x: invalid option: wait: buckets must be")
	require.ErrorContains(t, err, "x: invalid option: bad 7")
	require.NoError(t, adapter.NewConfig[option]("ns", nil).Err(sentinel))
}

// Buckets accepts exactly the finite, strictly increasing, non-empty lists,
// and returns a copy.
func FuzzBuckets(f *testing.F) {
	f.Add(0.1, 0.2, 0.3, 3)
	f.Add(0.1, 0.1, 0.3, 3)
	f.Add(math.NaN(), 1.0, 2.0, 3)
	f.Add(1.0, math.Inf(1), 2.0, 2)
	f.Add(-1.0, 0.0, 1.0, 0)
	f.Fuzz(func(t *testing.T, a, b, c float64, n int) {
		bounds := []float64{a, b, c}[:max(0, min(n, 3))]
		got, err := adapter.Buckets(bounds)
		valid := len(bounds) > 0
		for i, v := range bounds {
			valid = valid && !math.IsNaN(v) && !math.IsInf(v, 0) && (i == 0 || v > bounds[i-1])
		}
		if !valid {
			require.Error(t, err, "%v", bounds)
			return
		}
		require.NoError(t, err)
		require.Equal(t, bounds, got)
		if len(got) > 0 {
			got[0] = math.NaN()
			require.False(t, math.IsNaN(bounds[0]), "a copy")
		}
	})
}

// Read and NameOf recover the panics of a dispatcher's methods.
func TestReadRecoversPanics(t *testing.T) {
	_, err := adapter.Read(panicky{})
	var p *dispatch.PanicError
	require.ErrorAs(t, err, &p)
	_, err = adapter.NameOf(panicky{})
	require.ErrorAs(t, err, &p)
}

type panicky struct{}

func (panicky) Name() string                 { panic("name") }
func (panicky) Stats() dispatch.Stats        { panic("stats") }
func (panicky) Budget() (pending, max int64) { panic("budget") }
