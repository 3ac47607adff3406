package dispatch_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
)

// smallExchange and wideExchange are keyed exchanges of 8 and 96 bytes.
type (
	smallExchange struct{ seq int }
	wideExchange  struct {
		seq int
		pad [88]byte
	}
)

var _ = wideExchange{}.pad // its size is the point

// idleGroupBytes returns the heap a dispatcher of groups groups retains per
// group once every group handled one exchange and went idle, above what it
// retained before the first exchange: the groups' idle cost, with nothing of
// the exchanges left to hold. The handlers run on Immediate, so every lane
// has left by the time Emit returns, and two collections empty the pools.
func idleGroupBytes[T any](tb testing.TB, groups int, next func(i int) T, key func(T) int) float64 {
	tb.Helper()
	d, err := dispatch.NewKeyed("idle", orders, nil, key,
		func(context.Context, T) error { return nil },
		quietOf[T](), dispatch.WithParallelism(groups), dispatch.WithScheduler(schedulers.Immediate()))
	require.NoError(tb, err)
	require.NoError(tb, d.Prepare(context.Background()))
	require.NoError(tb, d.Start())
	forceOnCleanup(tb, d)
	before := retainedHeap()
	for i := range groups {
		require.NoError(tb, d.Emit(context.Background(), next(i)))
	}
	after := retainedHeap()
	require.Equal(tb, dispatch.Stats{Received: int64(groups), Succeeded: int64(groups)}, d.Stats())
	runtime.KeepAlive(d)
	d.Quiesce()
	<-d.Done()
	return float64(int64(after)-int64(before)) / float64(groups)
}

// retainedHeap is the live heap after two collections (the second one
// empties what sync.Pool's victim cache kept through the first).
func retainedHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// idleGroupBound is the most an idle group that once held exchanges may
// retain, whatever the exchange's size.
const idleGroupBound = 256

// idleCases measures idleGroupBytes for 65,536 groups and an exchange of 8
// bytes or one of 96.
var idleCases = func() []struct {
	name string
	per  func(testing.TB) float64
} {
	const groups = 1 << 16
	return []struct {
		name string
		per  func(testing.TB) float64
	}{
		{"exchange=8B", func(tb testing.TB) float64 {
			return idleGroupBytes(tb, groups, func(i int) smallExchange { return smallExchange{seq: i} },
				func(x smallExchange) int { return x.seq % groups })
		}},
		{"exchange=96B", func(tb testing.TB) float64 {
			return idleGroupBytes(tb, groups, func(i int) wideExchange { return wideExchange{seq: i} },
				func(x wideExchange) int { return x.seq % groups })
		}},
	}
}()

// A group that handled exchanges and went idle gives its slots back: 65,536
// groups used once then idle retain at most idleGroupBound bytes each, for
// an exchange of 8 bytes and one of 96 alike.
func TestIdleGroupsRetainLittle(t *testing.T) {
	for _, c := range idleCases {
		t.Run(c.name, func(t *testing.T) {
			per := c.per(t)
			t.Logf("%.0f B per idle group", per)
			assert.LessOrEqual(t, per, float64(idleGroupBound), "bytes retained per idle group")
		})
	}
}

// BenchmarkIdleGroupMemory reports the heap an idle group retains after it
// handled one exchange (B/group), for 65,536 groups.
func BenchmarkIdleGroupMemory(b *testing.B) {
	for _, c := range idleCases {
		b.Run(c.name, func(b *testing.B) {
			var per float64
			for b.Loop() {
				per = c.per(b)
			}
			b.ReportMetric(per, "B/group")
		})
	}
}
