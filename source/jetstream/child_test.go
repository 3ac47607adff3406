package jetstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/component"
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
	envOut        = "AGGFLOW_JETSTREAM_OUT"         // the file the child appends "key seq attempt" lines to
	envControl    = "AGGFLOW_JETSTREAM_CONTROL"     // set: resume without the reset
	envBench      = "AGGFLOW_JETSTREAM_BENCH"       // "plain" or "aggflow": consume the owned partitions to their end, then exit
	envMember     = "AGGFLOW_JETSTREAM_MEMBER"      // set: a dynamic assignment, this member's name; the records name their epoch
	envTTL        = "AGGFLOW_JETSTREAM_TTL"         // the leases' TTL
	envNoFence    = "AGGFLOW_JETSTREAM_NOFENCE"     // set: the control of the fence
	envStallAfter = "AGGFLOW_JETSTREAM_STALL"       // n: once n exchanges were handled, the handlers wait for their end (a backlog by construction)
	envStatic     = "AGGFLOW_JETSTREAM_STATIC"      // set: a static assignment under this member name (with envTTL and envWait); the records name their epoch
	envWait       = "AGGFLOW_JETSTREAM_WAIT"        // a static assignment's wait for a partition another member holds
	envPullExpiry = "AGGFLOW_JETSTREAM_PULL_EXPIRY" // a duration: the pulls' server-side expiry
	envWork       = "AGGFLOW_JETSTREAM_WORK"        // a duration: each handler's work
	envRacing     = "AGGFLOW_JETSTREAM_RACING"      // set: pulls with a client deadline (WithRacingPulls)
)

// envPoison is "key seq": that exchange fails every time, retried in place
// (failure_multiprocess_test.go).
const envPoison = "AGGFLOW_JETSTREAM_POISON"

// envFinished set: the child keeps its finished maps (WithFinishedMap).
const envFinished = "AGGFLOW_JETSTREAM_FINISHED"

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
	member := os.Getenv(envMember)
	var topo jetstream.Topology
	var own []int32
	var err error
	if member == "" {
		topo, own, err = childTopology()
	} else {
		topo, err = dynamicTopology()
	}
	if err != nil {
		return err
	}
	out, err := os.OpenFile(os.Getenv(envOut), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	if d := os.Getenv(envPullExpiry); d != "" {
		expiry, err := time.ParseDuration(d)
		if err != nil {
			return err
		}
		jetstream.SetPullExpiry(expiry)
	}
	work, _ := time.ParseDuration(os.Getenv(envWork)) // 0: none
	nc, js, err := jetstream.Connect(os.Getenv(envURL), reconnecting...)
	if err != nil {
		return err
	}
	defer nc.Close()
	sched, err := schedulers.NewParallel("child", 2)
	if err != nil {
		return err
	}
	defer sched.Dispose()

	stallAfter, _ := strconv.ParseInt(os.Getenv(envStallAfter), 10, 64) // 0: never
	static := os.Getenv(envStatic)
	epochs := member != "" || static != ""
	var handled atomic.Int64
	var mu sync.Mutex
	var line []byte
	record := func(ctx context.Context, d partition.Delivery[keyed]) error {
		if stallAfter > 0 && handled.Add(1) > stallAfter {
			<-ctx.Done() // the process is killed with what it fetched and did not handle
			return ctx.Err()
		}
		if work > 0 {
			time.Sleep(work) // the handler's work, not a synchronisation
		}
		mu.Lock()
		defer mu.Unlock()
		if l, ok := jetstream.LeaseOf(ctx); ok && epochs {
			// One write of one line to a file the members share (O_APPEND):
			// the file's order is the order the handlers ran in.
			line = fmt.Appendf(line[:0], "%s %d %d %d %s\n", d.Exchange.Key, d.Exchange.Seq, d.Attempt, l.Epoch, l.Member)
		} else {
			line = fmt.Appendf(line[:0], "%s %d %d\n", d.Exchange.Key, d.Exchange.Seq, d.Attempt)
		}
		_, err := out.Write(line)
		return err
	}
	opts := []jetstream.Option{jetstream.WithDurable(childDurable), jetstream.WithMaxPending(512)}
	if poison := os.Getenv(envPoison); poison != "" {
		record, opts = withPoison(poison, record, opts)
	}
	if os.Getenv(envControl) != "" {
		opts = append(opts, jetstream.WithoutReset())
	}
	if os.Getenv(envFinished) != "" {
		opts = append(opts, jetstream.WithFinishedMap())
	}
	if os.Getenv(envRacing) != "" {
		opts = append(opts, jetstream.WithRacingPulls())
	}
	if member != "" {
		ttl, err := time.ParseDuration(os.Getenv(envTTL))
		if err != nil {
			return err
		}
		opts = append(opts, jetstream.WithDynamicAssignment(member, ttl),
			jetstream.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		if os.Getenv(envNoFence) != "" {
			opts = append(opts, jetstream.WithoutFence())
		}
	}
	if static != "" {
		ttl, err := time.ParseDuration(os.Getenv(envTTL))
		if err != nil {
			return err
		}
		wait, err := time.ParseDuration(os.Getenv(envWait))
		if err != nil {
			return err
		}
		opts = append(opts, jetstream.WithStaticLease(static, ttl, wait),
			jetstream.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	c, err := jetstream.NewConsumer("child", jetstream.Subscription{JetStream: js, Topology: topo, Owned: own}, named, sched, keyedCodec, record, opts...)
	if err != nil {
		return err
	}
	r, err := component.NewRuntime("child", []component.Component{c})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = r.Run(ctx)
	fmt.Fprintf(os.Stderr, "stats: %+v\n", c.Stats())
	return err
}

// reconnecting are the connection options of the children and of the
// tests that restart the server: reconnect for ever, soon after a loss.
var reconnecting = []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}

// dynamicTopology reads the topology of a dynamic assignment.
func dynamicTopology() (jetstream.Topology, error) {
	n, err := strconv.Atoi(os.Getenv(envPartitions))
	return jetstream.Topology{Stream: "EX", Prefix: "ex", Partitions: n}, err
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
	c, err := jetstream.NewConsumer("bench", jetstream.Subscription{JetStream: js, Topology: topo, Owned: own}, named, sched, keyedCodec, count)
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
