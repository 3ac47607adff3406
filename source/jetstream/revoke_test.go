package jetstream_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/source/jetstream"
)

// recorder records the exchanges handled, per partition, in handling order,
// and counts the handlers of a released partition that ran after its
// release.
type recorder struct {
	mu       sync.Mutex
	runs     map[int32][]handled
	inFlight [2]atomic.Int32
	released [2]atomic.Bool
	late     atomic.Int32 // handlers that began after their partition's release
	block    func(ctx context.Context, d partition.Delivery[keyed])
	counted  func(p int32, n int)
}

func (r *recorder) handle(ctx context.Context, d partition.Delivery[keyed]) error {
	p := d.Partition
	if r.released[p].Load() {
		r.late.Add(1)
	}
	r.inFlight[p].Add(1)
	defer r.inFlight[p].Add(-1)
	if r.block != nil {
		r.block(ctx, d)
		if ctx.Err() != nil {
			return ctx.Err() // cancelled by a force: not recorded, not handled
		}
	}
	r.mu.Lock()
	r.runs[p] = append(r.runs[p], handled{key: d.Exchange.Key, seq: d.Exchange.Seq, attempt: d.Attempt})
	n := len(r.runs[p])
	r.mu.Unlock()
	if r.counted != nil {
		r.counted(p, n)
	}
	return nil
}

// take returns the records of partition p and forgets them.
func (r *recorder) take(p int32) []handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	run := r.runs[p]
	delete(r.runs, p)
	return run
}

// keysOf returns the test aggregates of partition p.
func keysOf(topo jetstream.Topology, keys int, p int32) []string {
	var out []string
	for k := range keys {
		if topo.PartitionOf(keyName(k)) == p {
			out = append(out, keyName(k))
		}
	}
	return out
}

// signalAt returns a channel closed once partition p counted n records.
func signalAt(p int32, n int) (func(int32, int), <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return func(q int32, m int) {
		if q == p && m >= n {
			once.Do(func() { close(ch) })
		}
	}, ch
}

func TestRevokeUnderLoadAcksThePrefixBeforeRelease(t *testing.T) {
	e := newEnv(t, 2)
	const keys, perKey = 100, 50
	e.publish(t, keys, perKey)
	rec := &recorder{runs: map[int32][]handled{}}
	at0, reached := signalAt(0, 500)
	at1, done1 := signalAt(1, len(keysOf(e.topo, keys, 1))*perKey)
	rec.counted = func(p int32, n int) { at0(p, n); at1(p, n) }
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0, 1}), named, newSched(t), keyedCodec, rec.handle,
		jetstream.WithMaxPending(64))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-reached

	settled, err := c.Revoke(ctx(t), 0)
	rec.released[0].Store(true)
	require.NoError(t, err)
	require.Zero(t, rec.inFlight[0].Load(), "no exchange of the partition runs once it is released")
	require.True(t, settled.OK)
	require.False(t, settled.Forced, "drained within the deadline")
	require.Equal(t, uint64(settled.Prefix), e.ackFloor(t, "c", 0), "the settled prefix is acknowledged and confirmed before Revoke returns")
	require.Equal(t, []int32{1}, c.Owned())
	_, err = c.Revoke(ctx(t), 0)
	require.ErrorIs(t, err, jetstream.ErrNotOwned)
	<-done1 // the other partition goes on to its end
	require.NoError(t, c.StopGracefully(ctx(t)))
	first := rec.take(0)
	require.Less(t, len(first), len(keysOf(e.topo, keys, 0))*perKey, "revoked before the partition's end")

	// The next owner starts right after the prefix: no duplicate, no loss.
	c2, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, rec.handle)
	require.NoError(t, err)
	rec.released[0].Store(false)
	rec.counted, reached = signalAt(0, len(keysOf(e.topo, keys, 0))*perKey-len(first))
	require.NoError(t, c2.Prepare(ctx(t)))
	require.NoError(t, c2.Start())
	<-reached
	require.NoError(t, c2.StopGracefully(ctx(t)))
	r := checkRuns([][]handled{first, rec.take(0)}, keysOf(e.topo, keys, 0), perKey)
	require.Equal(t, report{records: len(keysOf(e.topo, keys, 0)) * perKey, redelivered: r.redelivered}, r)
	require.Zero(t, rec.late.Load())
	require.Equal(t, report{records: len(keysOf(e.topo, keys, 1)) * perKey}, checkRuns([][]handled{rec.take(1)}, keysOf(e.topo, keys, 1), perKey))
}

func TestRevokeForcedAcksOnlyTheFinishedPrefix(t *testing.T) {
	e := newEnv(t, 1)
	const keys, perKey = 20, 20
	e.publish(t, keys, perKey)
	blocked := make(chan struct{})
	var once sync.Once
	rec := &recorder{runs: map[int32][]handled{}}
	rec.block = func(ctx context.Context, d partition.Delivery[keyed]) {
		if d.Exchange.Key == keyName(3) && d.Exchange.Seq == 10 && d.Attempt == 1 {
			once.Do(func() { close(blocked) })
			<-ctx.Done() // a handler that would never end but for the force
		}
	}
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, rec.handle,
		jetstream.WithMaxPending(32))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-blocked
	drain, cancel := context.WithCancel(ctx(t))
	cancel() // the deadline has passed: the rest is forced
	settled, err := c.Revoke(drain, 0)
	require.NoError(t, err)
	require.True(t, settled.Forced)
	require.Zero(t, rec.inFlight[0].Load())
	// key-3's 10th exchange is at stream sequence 9*keys+4.
	require.Less(t, settled.Prefix, int64(9*keys+4), "the prefix stops below the cancelled exchange")
	require.Equal(t, uint64(max(settled.Prefix, 0)), e.ackFloor(t, "c", 0))
	require.NoError(t, c.StopGracefully(ctx(t)))
	first := rec.take(0)

	c2, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, rec.handle)
	require.NoError(t, err)
	var reached <-chan struct{}
	rec.counted, reached = signalAt(0, keys*perKey-int(settled.Prefix))
	require.NoError(t, c2.Prepare(ctx(t)))
	require.NoError(t, c2.Start())
	<-reached
	require.NoError(t, c2.StopGracefully(ctx(t)))
	second := rec.take(0)
	require.Equal(t, keys*perKey-int(settled.Prefix), len(second), "the next owner starts at the prefix + 1")
	r := checkRuns([][]handled{first, second}, keysOf(e.topo, keys, 0), perKey)
	require.Zero(t, r.violations)
	require.Zero(t, r.lost)
	require.Zero(t, r.firstTry, "what ran above the prefix is replayed as a redelivery")
}
