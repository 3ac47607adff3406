package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
)

// The test binary re-executed with childEnv set runs as one group member of
// the multi-process tests instead of running tests.
const (
	childEnv   = "AGGFLOW_KAFKA_CHILD" // the mode: "member"
	brokersEnv = "AGGFLOW_KAFKA_CHILD_BROKERS"
	groupEnv   = "AGGFLOW_KAFKA_CHILD_GROUP"
	topicEnv   = "AGGFLOW_KAFKA_CHILD_TOPIC"
	delayEnv   = "AGGFLOW_KAFKA_CHILD_DELAY"   // a handler's simulated I/O, a time.Duration
	sessionEnv = "AGGFLOW_KAFKA_CHILD_SESSION" // the session timeout, a time.Duration (default: memberClientOptions')
	pendingEnv = "AGGFLOW_KAFKA_CHILD_PENDING" // WithMaxPending (default: the package's)
)

// poisonEnv is "id seq": that record fails every time, retried in place
// (failure_multiprocess_test.go).
const poisonEnv = "AGGFLOW_KAFKA_CHILD_POISON"

// memberClientOptions make a killed member's partitions move in about a
// second and a joining member be noticed in about 100 ms; the rebalance
// timeout holds the default revoke and commit timeouts (10 s each).
var memberClientOptions = []kgo.Opt{
	kgo.SessionTimeout(time.Second),
	kgo.HeartbeatInterval(100 * time.Millisecond),
	kgo.RebalanceTimeout(30 * time.Second),
}

// runChild runs a member until SIGTERM, then stops it gracefully and
// writes its Stats to stderr as "stats {json}". Each handled record is
// written to stdout, one unbuffered line each, as "key seq
// unix-nanos-at-start epoch partition offset" (the epoch of its lease), so
// a SIGKILL loses no line of a record whose handler returned.
func runChild(mode string) int {
	if mode == "rss" {
		return runRSSChild() // rss_test.go
	}
	if mode != "member" {
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	sched, err := schedulers.NewParallel("member", 16)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	delay, _ := time.ParseDuration(os.Getenv(delayEnv))
	handle := func(ctx context.Context, d partition.Delivery[event]) error {
		start := time.Now().UnixNano()
		l, _ := kafka.LeaseOf(ctx)
		if delay > 0 {
			time.Sleep(delay) // the handler's I/O
		}
		_, err := fmt.Fprintf(os.Stdout, "%s %d %d %d %d %d\n", d.Exchange.ID, d.Exchange.Seq, start, l.Epoch, d.Partition, d.Position)
		return err
	}
	clientOpts := memberClientOptions
	if session, err := time.ParseDuration(os.Getenv(sessionEnv)); err == nil {
		clientOpts = []kgo.Opt{kgo.SessionTimeout(session), kgo.HeartbeatInterval(session / 10), kgo.RebalanceTimeout(30 * time.Second)}
	}
	sub := kafka.Subscription{Brokers: strings.Split(os.Getenv(brokersEnv), ","), Group: os.Getenv(groupEnv), Topic: os.Getenv(topicEnv)}
	opts := []kafka.Option[event]{
		poisonPolicy(),
		// Debug level on stderr: the parent reads how long each revocation took.
		kafka.WithLogger[event](slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		kafka.WithClientOptions[event](clientOpts...),
	}
	if n, err := strconv.Atoi(os.Getenv(pendingEnv)); err == nil {
		opts = append(opts, kafka.WithMaxPending[event](n))
	}
	k, err := kafka.NewConsumer("member", sub, accounts, sched, codec, withPoison(handle), opts...)
	if err == nil {
		err = k.Prepare(ctx)
	}
	if err == nil {
		err = k.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {
	case <-ctx.Done():
	case <-k.Done():
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer stopCancel()
	code := 0
	if err := k.StopGracefully(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		code = 1
	}
	if stats, err := json.Marshal(k.Stats()); err == nil {
		fmt.Fprintf(os.Stderr, "stats %s\n", stats)
	}
	if err := sched.DisposeGracefully(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "dispose:", err)
		code = 1
	}
	return code
}
