package testkit_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/testkit"
)

var genNamed = aggregate.MaterializedNamedAggregate{Context: "test", Aggregate: "Gen"}

func TestKeysStayInRange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := rapid.SampledFrom([]testkit.Distribution{testkit.Uniform, testkit.Zipf, testkit.HotKey}).Draw(t, "d")
		ids := rapid.IntRange(1, 64).Draw(t, "ids")
		n := rapid.IntRange(0, 50).Draw(t, "n")
		keys := testkit.Keys(d, ids, n).Draw(t, "keys")
		if len(keys) != n {
			t.Fatalf("%d keys, want %d", len(keys), n)
		}
		for _, k := range keys {
			i, err := strconv.Atoi(strings.TrimPrefix(k, "id-"))
			if err != nil || i < 0 || i >= ids {
				t.Fatalf("key %q outside id-0..id-%d", k, ids-1)
			}
		}
	})
}

// share returns the fraction of keys equal to "id-0" in many draws.
func share(t *testing.T, d testkit.Distribution) float64 {
	hits, total := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		for _, k := range testkit.Keys(d, 32, 40).Draw(rt, "keys") {
			total++
			if k == "id-0" {
				hits++
			}
		}
	})
	return float64(hits) / float64(total)
}

func TestDistributionsAreSkewed(t *testing.T) {
	uniform, zipf, hot := share(t, testkit.Uniform), share(t, testkit.Zipf), share(t, testkit.HotKey)
	assert.Greater(t, hot, 0.6, "hot key takes most")
	assert.Greater(t, zipf, 2*uniform, "Zipf favours its first ids")
}

func TestWorkloads(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := testkit.Workloads(genNamed, 100).Draw(t, "w")
		next := map[string]int{}
		for _, x := range w.Exchanges {
			if x.Seq != next[x.ID.ID] {
				t.Fatalf("%s: seq %d, want %d", x.ID, x.Seq, next[x.ID.ID])
			}
			next[x.ID.ID]++
			if x.Do == testkit.Block && !w.Stop.Kind.Forces() {
				t.Fatalf("a blocking exchange in a run stopped by %v could never end", w.Stop.Kind)
			}
			if x.ID.Named != genNamed {
				t.Fatalf("named aggregate %v", x.ID.Named)
			}
		}
		if w.Stop.After < 0 || w.Stop.After > len(w.Exchanges) {
			t.Fatalf("stop point %d outside the stream of %d", w.Stop.After, len(w.Exchanges))
		}
	})
}

func TestPerform(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		id := aggregate.NewID(genNamed, "a")
		ctx := t.Context()
		assert.NoError(t, testkit.Perform(ctx, testkit.Exchange{ID: id, Do: testkit.Instant}))
		assert.ErrorIs(t, testkit.Perform(ctx, testkit.Exchange{ID: id, Do: testkit.Fail}), testkit.ErrInjected)
		assert.PanicsWithError(t, testkit.ErrInjected.Error(), func() {
			_ = testkit.Perform(ctx, testkit.Exchange{ID: id, Do: testkit.Panic})
		})
		start := time.Now()
		assert.NoError(t, testkit.Perform(ctx, testkit.Exchange{ID: id, Do: testkit.Delay, Delay: time.Millisecond}))
		assert.Equal(t, time.Millisecond, time.Since(start))

		cancelled, cancel := context.WithCancel(ctx)
		go func() {
			time.Sleep(time.Second) // virtual: the block ends only when ctx does
			cancel()
		}()
		assert.ErrorIs(t, testkit.Perform(cancelled, testkit.Exchange{ID: id, Do: testkit.Block}), context.Canceled)
		assert.Equal(t, time.Millisecond+time.Second, time.Since(start))
	})
}

func TestTag(t *testing.T) {
	x := testkit.Exchange{ID: aggregate.NewID(genNamed, "order-1"), Seq: 3}
	assert.Equal(t, testkit.Tag{Key: "order-1", Seq: 3, Group: 50}, x.Tag(64), "Wow's golden vector: order-1 mod 64 = 50")
}

func TestNames(t *testing.T) {
	assert.Equal(t, "hot-key", testkit.HotKey.String())
	assert.Equal(t, "block", testkit.Block.String())
	assert.Equal(t, "force-during-graceful", testkit.StopForceDuringGraceful.String())
	assert.Equal(t, "StopKind(7)", testkit.StopKind(7).String())
}
