package jetstream_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
	"github.com/aggflow/aggflow/testkit/benchcost"
)

// benchKeys is the number of aggregates of the throughput benchmarks.
const benchKeys = 1000

// BenchmarkConsume is the consumer feeding aggflow against a plain
// jetstream loop with the same ack policy (AckAll, one cumulative
// acknowledgement per 64 messages), both in one process, over b.N exchanges
// published beforehand on 8 partitions; the handler counts. ns/op is per
// exchange, publication excluded.
func BenchmarkConsume(b *testing.B) {
	b.Run("plain", func(b *testing.B) {
		e := newEnv(b, 8)
		require.NoError(b, e.publishN(ctx(b), benchKeys, b.N))
		b.ResetTimer()
		var handled atomic.Int64
		done := make(chan error, 8)
		for p := range int32(8) {
			go func() { done <- plainLoop(e, p, &handled) }()
		}
		for range 8 {
			require.NoError(b, <-done)
		}
		b.StopTimer()
		require.Equal(b, int64(b.N), handled.Load())
	})
	b.Run("aggflow", func(b *testing.B) {
		e := newEnv(b, 8)
		require.NoError(b, e.publishN(ctx(b), benchKeys, b.N))
		sched, err := schedulers.NewParallel("bench", 2)
		require.NoError(b, err)
		defer sched.Dispose()
		c := consumeAll(b, e, []int32{0, 1, 2, 3, 4, 5, 6, 7}, sched, func() {})
		b.ReportMetric(float64(c.Stats().Acks)/float64(b.N), "acks/op")
	})
}

// BenchmarkBindingCost is the Consumer's own cost beside the bare
// jetstream loop (plainLoop: the message iterator, decode inline, one AckAll
// acknowledgement per 64 messages, a goroutine per partition), in one run,
// on the same embedded server (in this process), over a preloaded backlog of
// b.N exchanges of 1,000 keys on 8 partitions: with a no-op handler and with
// a handler that spins 1 µs. The Consumer runs on a parallel scheduler of
// one goroutine per CPU. Each reports ns/record (wall, from the start to the
// last acknowledgement, the Consumer's graceful stop included),
// cpu-ns/record (the process's, the server's included), allocs/record (the
// server's included) and records/s; compare a binding's figures with its
// bare loop's of the same run (ratios), not across runs.
//
//	go -C source/jetstream test -run '^$' -bench BindingCost -benchtime 200000x -count 3 .
func BenchmarkBindingCost(b *testing.B) {
	for _, h := range []struct {
		name string
		work func()
	}{{"noop", func() {}}, {"spin-1us", func() { benchcost.Spin(time.Microsecond) }}} {
		b.Run(h.name+"/bare", func(b *testing.B) {
			e := newEnv(b, 8)
			require.NoError(b, e.publishN(ctx(b), benchKeys, b.N))
			var handled atomic.Int64
			done := make(chan error, 8)
			m := benchcost.Start(b)
			for p := range int32(8) {
				go func() { done <- plainLoopWith(e, p, &handled, h.work) }()
			}
			for range 8 {
				require.NoError(b, <-done)
			}
			m.Stop(b)
			require.Equal(b, int64(b.N), handled.Load())
		})
		b.Run(h.name+"/binding", func(b *testing.B) {
			e := newEnv(b, 8)
			require.NoError(b, e.publishN(ctx(b), benchKeys, b.N))
			sched, err := schedulers.NewParallel("bench", schedulers.DefaultPoolSize)
			require.NoError(b, err)
			defer sched.Dispose()
			c := consumeAll(b, e, []int32{0, 1, 2, 3, 4, 5, 6, 7}, sched, h.work)
			b.ReportMetric(float64(c.Stats().Acks)/float64(b.N), "acks/record")
		})
	}
}

// BenchmarkConsumeTwoProcesses is BenchmarkConsume with two consumer
// processes (this binary re-executed), 4 partitions each; the time runs
// from their start to their exit, process start and connection included.
func BenchmarkConsumeTwoProcesses(b *testing.B) {
	for _, mode := range []string{"plain", "aggflow"} {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b, 8)
			require.NoError(b, e.publishN(ctx(b), benchKeys, b.N))
			b.ResetTimer()
			var children []*exec.Cmd
			for _, own := range []string{ownedA, ownedB} {
				cmd := exec.Command(os.Args[0])
				cmd.Env = append(os.Environ(), envChild+"=1", envBench+"="+mode, envURL+"="+e.srv.URL(), envOwn+"="+own,
					envPartitions+"=8")
				cmd.Stderr = os.Stderr
				require.NoError(b, cmd.Start())
				children = append(children, cmd)
			}
			for _, cmd := range children {
				require.NoError(b, cmd.Wait())
			}
			b.StopTimer()
		})
	}
}

// consumeAll times a consumer of the owned partitions of e whose handler
// calls work, from Prepare until its graceful stop after b.N exchanges.
func consumeAll(b *testing.B, e *env, owned []int32, sched schedulers.Scheduler, work func(), opts ...jetstream.Option) *jetstream.Consumer[keyed] {
	b.Helper()
	var handled atomic.Int64
	all := make(chan struct{})
	handler := func(context.Context, partition.Delivery[keyed]) error {
		work()
		if handled.Add(1) == int64(b.N) {
			close(all)
		}
		return nil
	}
	c, err := jetstream.NewConsumer("bench", e.sub(owned), named, sched, keyedCodec, handler, opts...)
	require.NoError(b, err)
	m := benchcost.Start(b)
	require.NoError(b, c.Prepare(context.Background()))
	require.NoError(b, c.Start())
	<-all
	require.NoError(b, c.StopGracefully(context.Background()))
	m.Stop(b)
	return c
}

// plainLoop is the baseline: one partition's durable AckAll consumer read
// with the jetstream message iterator, decoded inline, one cumulative
// acknowledgement per 64 messages, until the partition's last message.
func plainLoop(e *env, p int32, handled *atomic.Int64) error {
	return plainLoopWith(e, p, handled, func() {})
}

// plainLoopWith is plainLoop calling work for each message.
func plainLoopWith(e *env, p int32, handled *atomic.Int64, work func()) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := e.js.Stream(ctx, e.topo.Stream)
	if err != nil {
		return err
	}
	last, err := s.GetLastMsgForSubject(ctx, e.topo.Subject(p))
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{Durable: "plain-" + e.topo.Subject(p)[3:],
		FilterSubject: e.topo.Subject(p), AckPolicy: natsjs.AckAllPolicy, AckWait: time.Hour, MaxAckPending: 2*dispatch.DefaultMaxPending + 256})
	if err != nil {
		return err
	}
	it, err := cons.Messages(natsjs.PullMaxMessages(jetstream.DefaultFetchBatch))
	if err != nil {
		return err
	}
	defer it.Stop()
	for n := 0; ; n++ {
		msg, err := it.Next()
		if err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		if _, err := decodeKeyed(msg.Headers().Get(jetstream.KeyHeader), msg); err != nil {
			return err
		}
		work()
		handled.Add(1)
		switch {
		case meta.Sequence.Stream == last.Sequence:
			return msg.DoubleAck(ctx)
		case n%64 == 63:
			if err := msg.Ack(); err != nil {
				return err
			}
		}
	}
}

// ioTime is the blocking I/O of BenchmarkBlockingHandler's handler.
const ioTime = time.Millisecond

// BenchmarkBlockingHandler is one partition of 1,000 aggregates whose
// handler blocks 1 ms (time.Sleep standing for I/O): aggflow's key-ordered
// concurrency on a bounded elastic scheduler (256 goroutines, 256 groups)
// against one message at a time. ns/op is per exchange.
func BenchmarkBlockingHandler(b *testing.B) {
	b.Run("one-at-a-time", func(b *testing.B) {
		e := newEnv(b, 1)
		require.NoError(b, e.publishN(ctx(b), benchKeys, b.N))
		b.ResetTimer()
		var handled atomic.Int64
		require.NoError(b, plainLoopWith(e, 0, &handled, func() { time.Sleep(ioTime) }))
		b.StopTimer()
		require.Equal(b, int64(b.N), handled.Load())
	})
	b.Run("aggflow-bounded-elastic", func(b *testing.B) {
		e := newEnv(b, 1)
		require.NoError(b, e.publishN(ctx(b), benchKeys, b.N))
		sched, err := schedulers.NewBoundedElastic("io", 256)
		require.NoError(b, err)
		defer sched.Dispose()
		consumeAll(b, e, []int32{0}, sched, func() { time.Sleep(ioTime) },
			jetstream.WithPartitionOptions(partition.WithGroups(256)))
	})
}
