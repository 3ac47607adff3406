package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
)

// The environment of a child process: the test binary re-executed as one
// consumer process of the multi-process tests.
const (
	envChild      = "AGGFLOW_JETSTREAM_CHILD" // set: run as a child
	envURL        = "AGGFLOW_JETSTREAM_URL"
	envOwn        = "AGGFLOW_JETSTREAM_OWN" // owned partitions, comma-separated
	envPartitions = "AGGFLOW_JETSTREAM_PARTITIONS"
	envOut        = "AGGFLOW_JETSTREAM_OUT"     // the file the child appends "key seq attempt" lines to
	envControl    = "AGGFLOW_JETSTREAM_CONTROL" // set: resume without the reset
	envBench      = "AGGFLOW_JETSTREAM_BENCH"   // "plain" or "aggflow": consume the owned partitions to their end, then exit
)

// childDurable is the durable prefix every child shares.
const childDurable = "child"

// runChild is the child process: a consumer of the partitions it owns whose
// handler appends each exchange to its file before returning (so a record
// is on disk before its position can be acknowledged); SIGTERM stops it
// gracefully. It returns the exit code.
func runChild() int {
	run := child
	if os.Getenv(envBench) != "" {
		run = benchChild
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// childTopology reads the topology and the owned partitions from the
// environment.
func childTopology() (jetstream.Topology, []int32, error) {
	n, err := strconv.Atoi(os.Getenv(envPartitions))
	if err != nil {
		return jetstream.Topology{}, nil, err
	}
	var own []int32
	for _, s := range strings.Split(os.Getenv(envOwn), ",") {
		p, err := strconv.Atoi(s)
		if err != nil {
			return jetstream.Topology{}, nil, err
		}
		own = append(own, int32(p))
	}
	return jetstream.Topology{Stream: "EX", Prefix: "ex", Partitions: n}, own, nil
}

func child() error {
	topo, own, err := childTopology()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(os.Getenv(envOut), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	nc, js, err := jetstream.Connect(os.Getenv(envURL))
	if err != nil {
		return err
	}
	defer nc.Close()
	sched, err := schedulers.NewParallel("child", 2)
	if err != nil {
		return err
	}
	defer sched.Dispose()

	var mu sync.Mutex
	var line []byte
	record := func(_ context.Context, d partition.Delivery[keyed]) error {
		mu.Lock()
		defer mu.Unlock()
		line = fmt.Appendf(line[:0], "%s %d %d\n", d.Exchange.Key, d.Exchange.Seq, d.Attempt)
		_, err := out.Write(line)
		return err
	}
	opts := []jetstream.Option[keyed]{jetstream.WithDurable[keyed](childDurable), jetstream.WithMaxPending[keyed](512)}
	if os.Getenv(envControl) != "" {
		opts = append(opts, jetstream.WithoutReset[keyed]())
	}
	c, err := jetstream.NewConsumer("child", js, topo, own, decodeKeyed, named, sched, keyOf, record, opts...)
	if err != nil {
		return err
	}
	r, err := dispatch.NewRuntime("child", []dispatch.Component{c})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return r.Run(ctx)
}

// benchChild consumes the owned partitions to their last message, the
// plain loop's way or aggflow's, and returns.
func benchChild() error {
	topo, own, err := childTopology()
	if err != nil {
		return err
	}
	nc, js, err := jetstream.Connect(os.Getenv(envURL))
	if err != nil {
		return err
	}
	defer nc.Close()
	e := &env{nc: nc, js: js, topo: topo}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if os.Getenv(envBench) == "plain" {
		var handled atomic.Int64
		errs := make(chan error, len(own))
		for _, p := range own {
			go func() { errs <- plainLoop(e, p, &handled) }()
		}
		for range own {
			if err := <-errs; err != nil {
				return err
			}
		}
		return nil
	}
	s, err := js.Stream(ctx, topo.Stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx, natsjs.WithSubjectFilter(topo.Prefix+".>"))
	if err != nil {
		return err
	}
	var total int64
	for _, p := range own {
		total += int64(info.State.Subjects[topo.Subject(p)])
	}
	if total == 0 {
		return nil // nothing was published to these partitions
	}
	sched, err := schedulers.NewParallel("bench", 2)
	if err != nil {
		return err
	}
	defer sched.Dispose()
	var handled atomic.Int64
	all := make(chan struct{})
	count := func(context.Context, partition.Delivery[keyed]) error {
		if handled.Add(1) == total {
			close(all)
		}
		return nil
	}
	c, err := jetstream.NewConsumer("bench", js, topo, own, decodeKeyed, named, sched, keyOf, count)
	if err != nil {
		return err
	}
	if err := c.Prepare(ctx); err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	select {
	case <-all:
	case <-c.Done():
		return c.Err()
	case <-ctx.Done():
		c.ForceStop()
		return ctx.Err()
	}
	return c.StopGracefully(ctx)
}
