package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

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
)

// childDurable is the durable prefix every child shares.
const childDurable = "child"

// runChild is the child process: a consumer of the partitions it owns whose
// handler appends each exchange to its file before returning (so a record
// is on disk before its position can be acknowledged); SIGTERM stops it
// gracefully. It returns the exit code.
func runChild() int {
	if err := child(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func child() error {
	n, err := strconv.Atoi(os.Getenv(envPartitions))
	if err != nil {
		return err
	}
	var own []int32
	for _, s := range strings.Split(os.Getenv(envOwn), ",") {
		p, err := strconv.Atoi(s)
		if err != nil {
			return err
		}
		own = append(own, int32(p))
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
	topo := jetstream.Topology{Stream: "EX", Prefix: "ex", Partitions: n}
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
