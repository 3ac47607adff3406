package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
)

// memberEnv selects member mode: the program, re-executed by the
// coordinator, runs one consumer of the group until SIGTERM, then writes its
// report to stdout.
const memberEnv = "FLIGHTS_KAFKA_MEMBER"

// memberArgs is what the coordinator hands a member, as the value of
// memberEnv: "name;brokers;group;topic;airports".
type memberArgs struct {
	name, group, topic string
	brokers            []string
	airports           int
}

func (a memberArgs) String() string {
	return strings.Join([]string{a.name, strings.Join(a.brokers, ","), a.group, a.topic, strconv.Itoa(a.airports)}, ";")
}

func parseMemberArgs(s string) (memberArgs, error) {
	f := strings.Split(s, ";")
	if len(f) != 5 {
		return memberArgs{}, fmt.Errorf("flights-kafka: member arguments %q", s)
	}
	n, err := strconv.Atoi(f[4])
	if err != nil || n < 1 {
		return memberArgs{}, fmt.Errorf("flights-kafka: member airports %q", f[4])
	}
	return memberArgs{name: f[0], brokers: strings.Split(f[1], ","), group: f[2], topic: f[3], airports: n}, nil
}

// report is what a member tells the coordinator when it stops.
type report struct {
	Name        string                `json:"name"`
	Handled     int64                 `json:"handled"`
	Failed      int64                 `json:"failed"`
	Discarded   int64                 `json:"discarded"`
	Redelivered int64                 `json:"redelivered"`
	Partitions  []int32               `json:"partitions"`
	States      map[int]airport.State `json:"states"` // by origin airport index
	Error       string                `json:"error,omitempty"`
}

// airportAggregate is the named aggregate: each origin airport is one
// aggregate, its IATA code the id.
var airportAggregate = aggregate.MaterializedNamedAggregate{Context: "flights", Aggregate: "Airport"}

// stateSlot pads an airport's state to its own cache lines.
type stateSlot struct {
	airport.State
	_ [64]byte
}

// runMember consumes until SIGTERM and writes its report to stdout; it
// returns the exit status.
// memberSession is a member's session timeout: how long a killed member's
// partitions wait before the group moves them (see kafka's package doc).
const memberSession = 6 * time.Second

func runMember(spec string, stdout, stderr io.Writer) int {
	args, err := parseMemberArgs(spec)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	sched, err := schedulers.NewParallel(args.name, schedulers.DefaultPoolSize)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	defer sched.Dispose()
	states := make([]stateSlot, args.airports)
	var redelivered atomic.Int64
	handle := func(_ context.Context, d partition.Delivery[departure]) error {
		if d.Redelivered() {
			redelivered.Add(1)
		}
		states[d.Exchange.Origin].Apply(d.Exchange.Flight)
		return nil
	}
	k, err := kafka.NewConsumer(args.name, kafka.Subscription{Brokers: args.brokers, Group: args.group, Topic: args.topic},
		airportAggregate, sched, kafka.Codec[departure]{Decode: decode, ID: func(d departure) string { return d.origin }}, handle,
		kafka.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		// A member killed without leaving holds its partitions for the
		// session: franz-go's 45 s default would stop them for about 50 s.
		// 6 s is the lowest a broker allows by default.
		kafka.WithClientOptions(kgo.SessionTimeout(memberSession), kgo.HeartbeatInterval(memberSession/10)))
	if err == nil {
		err = k.Prepare(ctx)
	}
	if err == nil {
		err = k.Start()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	select {
	case <-ctx.Done():
	case <-k.Done():
	}
	owned := k.Owned()
	slices.Sort(owned)
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopCancel()
	r := report{Name: args.name, Partitions: owned, States: map[int]airport.State{}}
	if err := k.StopGracefully(stopCtx); err != nil {
		r.Error = err.Error()
	}
	st := k.Stats()
	r.Handled, r.Failed, r.Discarded = st.Succeeded, st.Failed, st.Dropped+st.Discarded
	r.Redelivered = redelivered.Load()
	for i := range states {
		if states[i].Departures > 0 {
			r.States[i] = states[i].State
		}
	}
	if err := json.NewEncoder(stdout).Encode(r); err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	if r.Error != "" {
		return exitFailed
	}
	return exitOK
}
