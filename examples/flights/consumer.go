package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
)

// consumerStopTimeout bounds a consumer process's graceful stop.
const consumerStopTimeout = 30 * time.Second

// consumerMain is a consumer process of -source jetstream: it consumes
// its partitions (ownEnv) from the server at url until it handled all
// they held when it started, or SIGTERM stops it gracefully, and writes
// its report on stdout. It returns the exit status.
func consumerMain(url string, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return exitUsage
	}
	own, err := ownedPartitions(os.Getenv(ownEnv))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	r, err := consume(ctx, cfg, url, own)
	if err != nil {
		r.Error = err.Error()
	}
	if err := json.NewEncoder(stdout).Encode(r); err != nil {
		fmt.Fprintln(stderr, "flights: consumer:", err)
		return exitFailed
	}
	if r.Error != "" {
		return exitFailed
	}
	return exitOK
}

// airports holds a consumer process's states by airport code. An
// airport's flights are applied one at a time (they are one aggregate),
// so only the map needs the lock.
type airports struct {
	mu     sync.Mutex
	states map[string]*airport.State
}

func (a *airports) of(code string) *airport.State {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.states[code]
	if st == nil {
		st = new(airport.State)
		a.states[code] = st
	}
	return st
}

// consume runs the consumer until its partitions' flights are handled or
// ctx ends, and reports.
func consume(ctx context.Context, cfg config, url string, own []int32) (consumerReport, error) {
	report := consumerReport{States: map[string]airport.State{}}
	nc, js, err := jetstream.Connect(url)
	if err != nil {
		return report, err
	}
	defer nc.Close()
	total, err := flightsIn(ctx, js, own)
	if err != nil {
		return report, err
	}
	sched, err := schedulers.NewParallel("flights", cfg.pool)
	if err != nil {
		return report, err
	}
	defer sched.Dispose()

	held := airports{states: map[string]*airport.State{}}
	var handled atomic.Int64
	all := make(chan struct{})
	handle := func(ctx context.Context, d partition.Delivery[departure]) error {
		burn(ctx, cfg.handlerCost)
		held.of(d.Exchange.origin).Apply(d.Exchange.Flight)
		if handled.Add(1) == total {
			close(all)
		}
		return nil
	}
	obs := &observer{}
	c, err := jetstream.NewConsumer(dispatcherName, jetstream.Subscription{JetStream: js, Topology: flightsTopology, Owned: own},
		airportAggregate, sched, jetstream.Codec[departure]{Decode: decodeFlight, ID: func(d departure) string { return d.origin }}, handle,
		jetstream.WithMaxPending[departure](cfg.maxPending),
		jetstream.WithPartitionOptions(partition.WithGroups[departure](cfg.parallelism),
			partition.WithDispatchOptions(dispatch.WithObserver[partition.Delivery[departure]](obs))))
	if err != nil {
		return report, err
	}
	if err := c.Prepare(ctx); err != nil {
		return report, err
	}
	if err := c.Start(); err != nil {
		return report, err
	}
	if total == 0 {
		close(all)
	}
	select {
	case <-all:
	case <-ctx.Done():
	case <-c.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), consumerStopTimeout)
	defer cancel()
	if err = c.StopGracefully(stopCtx); stopCtx.Err() != nil {
		c.ForceStop()
		<-c.Done()
	}
	st := c.Stats()
	x := st.Exchanges
	report.Exchanges = counts{Received: x.Received, Succeeded: x.Succeeded, Failed: x.Failed, Discarded: x.Discarded, InFlight: x.InFlight}
	report.Acks = st.Acks
	report.QueueWait = percentiles{P50: obs.queueWait.Quantile(0.50), P99: obs.queueWait.Quantile(0.99)}
	report.Handling = percentiles{P50: obs.handling.Quantile(0.50), P99: obs.handling.Quantile(0.99)}
	held.mu.Lock()
	for code, s := range held.states {
		report.States[code] = *s
	}
	held.mu.Unlock()
	return report, err
}

// flightsIn counts the flights the stream holds in partitions own.
func flightsIn(ctx context.Context, js natsjs.JetStream, own []int32) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, flightsTopology.Stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx, natsjs.WithSubjectFilter(flightsTopology.Prefix+".>"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range own {
		n += int64(info.State.Subjects[flightsTopology.Subject(p)])
	}
	return n, nil
}
