package jetstream_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
)

// A decoder that ends its goroutine with runtime.Goexit (what t.FailNow
// does) stops the consumer with an error, as its panic does, and nothing
// past the handled prefix is acknowledged.
func TestADecoderGoexitStopsTheConsumer(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 1, 1)
	exit := func(string, natsjs.Msg) (keyed, error) { runtime.Goexit(); return keyed{}, nil }
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), jetstream.Codec[keyed]{Decode: exit, ID: keyOf}, noop)
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.ForceStop(); <-c.Done() })
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the consumer did not stop after its decoder's Goexit")
	}
	require.ErrorIs(t, c.Err(), schedulers.ErrGoexit)
	var pe *jetstream.PanicError
	require.ErrorAs(t, c.Err(), &pe)
	require.Zero(t, e.ackFloor(t, "c", 0))
}

// The fetching goroutine runs user code other than the decoder too: the
// codec's ID (through the partition's intake) and the reject hook. Each
// that ends it with runtime.Goexit stops the consumer with an error, the
// exchanges before are handled, and nothing past them is acknowledged.
func TestAnIDOrRejectHookGoexitStopsTheConsumer(t *testing.T) {
	cases := map[string]func(codec *jetstream.Codec[keyed]) []jetstream.Option{
		"Codec.ID": func(codec *jetstream.Codec[keyed]) []jetstream.Option {
			codec.ID = func(x keyed) string {
				if x.Seq == 3 {
					runtime.Goexit()
				}
				return x.Key
			}
			return nil
		},
		"reject hook": func(codec *jetstream.Codec[keyed]) []jetstream.Option {
			codec.Decode = func(key string, msg natsjs.Msg) (keyed, error) {
				x, err := decodeKeyed(key, msg)
				if err == nil && x.Seq == 3 {
					err = errors.New("refused")
				}
				return x, err
			}
			return []jetstream.Option{jetstream.WithRejected(func(context.Context, natsjs.Msg, error) error {
				runtime.Goexit()
				return nil
			})}
		},
	}
	for name, setUp := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.publish(t, 1, 5)
			codec := keyedCodec
			opts := setUp(&codec)
			var mu sync.Mutex
			var seen []uint64
			handler := func(_ context.Context, d partition.Delivery[keyed]) error {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, d.Exchange.Seq)
				return nil
			}
			c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), codec, handler, opts...)
			require.NoError(t, err)
			require.NoError(t, c.Prepare(ctx(t)))
			require.NoError(t, c.Start())
			t.Cleanup(func() { c.ForceStop(); <-c.Done() })
			select {
			case <-c.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the consumer did not stop after the Goexit")
			}
			require.ErrorIs(t, c.Err(), schedulers.ErrGoexit)
			mu.Lock()
			assert.Equal(t, []uint64{1, 2}, seen, "the exchanges before were handled, none after")
			mu.Unlock()
			assert.LessOrEqual(t, e.ackFloor(t, "c", 0), uint64(2), "nothing past the handled prefix acknowledged")
		})
	}
}

// One exchange held (its handler blocks) at the bottom of a partition whose
// backlog is far above the bound: the partition stops pulling with exactly
// the bound delivered and unacknowledged (the server's count: MaxAckPending,
// derived from the bound, is never what stops it), the rest left on the
// server; the other partition is handled to its end meanwhile; once the
// held exchange finishes, everything is handled in order and acknowledged
// to the end.
func TestAStuckExchangeHoldsNoMoreThanTheBound(t *testing.T) {
	const keys, perKey, bound, batch = 100, 40, 200, 50
	e := newEnv(t, 2)
	e.publish(t, keys, perKey)
	first := uint64(0) // the stream sequence of partition 0's first exchange
	inOne := 0
	for i := range keys * perKey {
		switch p := e.topo.PartitionOf(keyName(i % keys)); {
		case p == 0 && first == 0:
			first = uint64(i + 1)
		case p == 1:
			inOne++
		}
	}
	require.Greater(t, keys*perKey-inOne, 4*bound, "a backlog far above the bound")
	require.Positive(t, inOne)

	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	log := newHandledLog(keys * perKey)
	var whileHeld, ones atomic.Int64 // partition 0's exchanges handled while the first is held; partition 1's
	oneDone := make(chan struct{})
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0, 1}), named, newSched(t), keyedCodec,
		func(ctx context.Context, d partition.Delivery[keyed]) error {
			switch {
			case d.Partition == 0 && d.Position == int64(first):
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			case d.Partition == 0:
				select {
				case <-release:
				default:
					whileHeld.Add(1)
				}
			default:
				if ones.Add(1) == int64(inOne) {
					close(oneDone)
				}
			}
			return log.handle(ctx, d)
		}, jetstream.WithMaxHeld(bound, 0), jetstream.WithFetchBatch(batch))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	t.Cleanup(func() { c.ForceStop(); <-c.Done() })

	select {
	case <-oneDone:
	case <-time.After(30 * time.Second):
		t.Fatalf("partition 1: %d of %d handled while partition 0 is held", ones.Load(), inOne)
	}
	var ackPending, pending, waiting int
	require.Eventually(t, func() bool {
		info, err := e.js.Consumer(ctx(t), e.topo.Stream, "c-0")
		require.NoError(t, err)
		i := info.CachedInfo()
		ackPending, pending, waiting = i.NumAckPending, int(i.NumPending), i.NumWaiting
		return ackPending >= bound && waiting == 0
	}, 20*time.Second, 5*time.Millisecond, "partition 0 stopped pulling at its bound")
	require.Equal(t, bound, ackPending, "delivered and unacknowledged: the bound")
	require.Positive(t, pending, "the rest of the backlog left on the server")
	require.Less(t, whileHeld.Load(), int64(bound), "handled above the held exchange")

	once.Do(func() { close(release) })
	select {
	case <-log.all:
	case <-time.After(30 * time.Second):
		t.Fatalf("handled %d of %d", log.n, keys*perKey)
	}
	for p := range int32(2) {
		require.Eventually(t, func() bool { return e.ackFloor(t, "c", p) == e.lastSeq(t, p) }, 20*time.Second,
			5*time.Millisecond, "partition %d acknowledged to its end", p)
	}
	require.NoError(t, c.StopGracefully(ctx(t)))
	log.mu.Lock()
	defer log.mu.Unlock()
	for k := range keys {
		seqs := log.byKey[keyName(k)]
		require.Len(t, seqs, perKey)
		for i, s := range seqs {
			require.Equal(t, uint64(i+1), s, "key %d", k)
		}
	}
}

// A position the server queued for a pull request before the reset (the
// previous owner's, or the previous claim's) comes back for redelivery after
// the partition was delivered past it: here the previous holder naks its
// copy, as the server requeues one whose pull request was given up (the
// flake of the SIGKILL dynamic test: "track 57: not above 2071"). The
// partition received that position since its reset, so it drops the
// redelivery and goes on; it must not stop with ErrRedelivered.
func TestRedeliveryOfAPositionReceivedIsDropped(t *testing.T) {
	for name, opts := range map[string][]jetstream.Option{
		"static":  nil,
		"dynamic": {jetstream.WithDynamicAssignment("a", 10*time.Second)},
	} {
		t.Run(name, func(t *testing.T) {
			const n = 20
			e := newEnv(t, 1)
			e.publish(t, 1, n) // one aggregate: one group, handled one after the other
			release := make(chan struct{})
			var mu sync.Mutex
			var seqs []uint64
			handled := make(chan struct{})
			handler := func(ctx context.Context, d partition.Delivery[keyed]) error {
				if d.Exchange.Seq == 1 {
					<-release // the prefix stays below every position until the redelivery came
				}
				mu.Lock()
				defer mu.Unlock()
				if seqs = append(seqs, d.Exchange.Seq); len(seqs) == n {
					close(handled)
				}
				return nil
			}
			owned := []int32{0}
			if name == "dynamic" {
				owned = nil
			}
			c, err := jetstream.NewConsumer("c", e.sub(owned), named, newSched(t), keyedCodec, handler, opts...)
			require.NoError(t, err)
			require.NoError(t, c.Prepare(ctx(t)))

			// The previous holder: 3 positions delivered to it before the reset.
			cons, err := e.js.Consumer(ctx(t), e.topo.Stream, "c-0")
			require.NoError(t, err)
			// Both assignments pin the durable consumer to its owner's pulls.
			batch, err := cons.Fetch(3, natsjs.FetchMaxWait(5*time.Second), natsjs.FetchPriorityGroup("aggflow"))
			require.NoError(t, err)
			var stale []natsjs.Msg
			for m := range batch.Messages() {
				stale = append(stale, m)
			}
			require.NoError(t, batch.Error())
			require.Len(t, stale, 3)

			require.NoError(t, c.Start())
			require.Eventually(t, func() bool { return c.Stats().Fetched == n }, 20*time.Second, 5*time.Millisecond,
				"every position delivered since the reset")
			require.NoError(t, stale[2].Nak()) // the server queues position 3 again: it is pending since the reset
			require.Eventually(t, func() bool { return c.Stats().Fetched == n+1 }, 20*time.Second, 5*time.Millisecond,
				"the redelivery")
			require.Equal(t, component.StateRunning, c.State(), "the consumer went on: %v", c.Err())
			require.Equal(t, int64(1), c.Stats().Duplicates)
			close(release)
			select {
			case <-handled:
			case <-time.After(20 * time.Second):
				t.Fatal("not every exchange handled")
			}
			require.Eventually(t, func() bool { return e.ackFloor(t, "c", 0) == e.lastSeq(t, 0) }, 20*time.Second, 5*time.Millisecond,
				"acknowledged to the end")
			require.NoError(t, c.StopGracefully(ctx(t)))
			mu.Lock()
			defer mu.Unlock()
			want := make([]uint64, n)
			for i := range want {
				want[i] = uint64(i + 1)
			}
			require.Equal(t, want, seqs, "each once, in order")
		})
	}
}

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

// publishRaw publishes data on partition p's subject with the given headers.
func (e *env) publishRaw(t *testing.T, p int32, hdr nats.Header, data []byte) uint64 {
	t.Helper()
	ack, err := e.js.PublishMsg(ctx(t), &nats.Msg{Subject: e.topo.Subject(p), Header: hdr, Data: data})
	require.NoError(t, err)
	return ack.Sequence
}

func TestAMessageWithoutTheKeyStopsTheConsumerByDefault(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 5, 2) // sequences 1..10
	bad := e.publishRaw(t, 0, nil, encodeSeq(3))
	e.publish(t, 5, 1) // after it: never delivered
	c := newTestConsumer(t, e, []int32{0})
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-c.Done()
	err := c.Err()
	require.ErrorIs(t, err, jetstream.ErrMissingKey)
	require.ErrorContains(t, err, "stream sequence 11")
	require.Equal(t, bad-1, e.ackFloor(t, "c", 0), "what came before is acknowledged, the message is not")
}

func TestARejectHookSettlesTheMessage(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 5, 2)
	missing := e.publishRaw(t, 0, nil, encodeSeq(3))
	undecodable := e.publishRaw(t, 0, nats.Header{jetstream.KeyHeader: []string{"key-1"}}, []byte("short"))
	e.publish(t, 5, 1)
	var reasons []error
	var handled atomic.Int32
	all := make(chan struct{})
	parked := func(_ context.Context, msg natsjs.Msg, err error) error {
		reasons = append(reasons, err) // one goroutine per partition: no lock needed here
		return nil
	}
	count := func(context.Context, partition.Delivery[keyed]) error {
		if handled.Add(1) == 15 {
			close(all)
		}
		return nil
	}
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), keyedCodec, count,
		jetstream.WithRejected(parked))
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-all
	require.NoError(t, c.StopGracefully(ctx(t)))
	require.Len(t, reasons, 2)
	require.ErrorIs(t, reasons[0], jetstream.ErrMissingKey)
	require.ErrorIs(t, reasons[1], jetstream.ErrDecode)
	require.ErrorContains(t, reasons[1], "payload of 5 bytes")
	require.Less(t, missing, undecodable)
	require.Equal(t, e.lastSeq(t, 0), e.ackFloor(t, "c", 0), "settled messages are acknowledged with the prefix")
	require.Equal(t, int64(2), c.Stats().Rejected)
}

func TestADecoderPanicIsRejectedAsAPanicError(t *testing.T) {
	e := newEnv(t, 1)
	e.publish(t, 1, 1)
	boom := func(string, natsjs.Msg) (keyed, error) { panic("boom") }
	c, err := jetstream.NewConsumer("c", e.sub([]int32{0}), named, newSched(t), jetstream.Codec[keyed]{Decode: boom, ID: keyOf}, noop)
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-c.Done()
	require.ErrorIs(t, c.Err(), jetstream.ErrDecode)
	var pe *jetstream.PanicError
	require.True(t, errors.As(c.Err(), &pe))
	require.Equal(t, "boom", pe.Value)
	require.Zero(t, e.ackFloor(t, "c", 0))
}

func TestAFailingRejectHookStopsTheConsumer(t *testing.T) {
	e := newEnv(t, 1)
	e.publishRaw(t, 0, nil, encodeSeq(1))
	errPark := errors.New("dead-letter subject unavailable")
	c := newTestConsumer(t, e, []int32{0}, jetstream.WithRejected(func(context.Context, natsjs.Msg, error) error { return errPark }))
	require.NoError(t, c.Prepare(ctx(t)))
	require.NoError(t, c.Start())
	<-c.Done()
	require.ErrorIs(t, c.Err(), errPark)
	require.ErrorIs(t, c.Err(), jetstream.ErrMissingKey)
	require.Zero(t, e.ackFloor(t, "c", 0))
}
