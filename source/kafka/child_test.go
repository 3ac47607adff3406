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
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	sessionEnv = "AGGFLOW_KAFKA_CHILD_SESSION" // the session timeout, a time.Duration (default: memberSession)
	pendingEnv = "AGGFLOW_KAFKA_CHILD_PENDING" // WithMaxPending (default: the package's)
)

// poisonEnv is "id seq": that record fails every time, retried in place
// (failure_multiprocess_test.go).
const poisonEnv = "AGGFLOW_KAFKA_CHILD_POISON"

// memberSession is a member process's session timeout, with heartbeats
// every tenth of it: its leases last 2.4 s from the last heartbeat sent and
// answered. On a 2-core machine loaded 7 times over, with -race, the
// heartbeats of a 1 s session came up to 700 ms apart (kfake answers every
// request from one goroutine, behind the fetches): the 800 ms leases
// lapsed and the group dropped members, which replays what ran above the
// commits though the tests that use it are about joins, handoffs and
// kills, not the session.
const memberSession = 3 * time.Second

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
		return runRSSChild() // pause_test.go
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
	// Debug level on stderr: the parent reads how long each revocation took.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	session := memberSession
	if d, err := time.ParseDuration(os.Getenv(sessionEnv)); err == nil {
		session = d
	}
	clientOpts := []kgo.Opt{kgo.SessionTimeout(session), kgo.HeartbeatInterval(session / 10), kgo.RebalanceTimeout(30 * time.Second),
		kgo.WithHooks(&slowHeartbeats{log: logger, over: session * 2 / 5})}
	sub := kafka.Subscription{Brokers: strings.Split(os.Getenv(brokersEnv), ","), Group: os.Getenv(groupEnv), Topic: os.Getenv(topicEnv)}
	opts := []kafka.Option{
		poisonPolicy(),
		kafka.WithLogger(logger),
		kafka.WithClientOptions(clientOpts...),
	}
	if n, err := strconv.Atoi(os.Getenv(pendingEnv)); err == nil {
		opts = append(opts, kafka.WithMaxPending(n))
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

// syncedMsg is the line a member writes when the group answers its
// SyncGroup (an assignment), with the wall clock, ns, as "at".
const syncedMsg = "group assignment answered"

// slowHeartbeats logs, at WARN, a heartbeat answered more than over after
// the previous one was sent (half a lease, at two fifths of the session):
// what a lapsed lease of a member the group kept was waiting for, in the
// members' warnings a failed test prints; a JoinGroup as slow too (no
// heartbeat is sent while it waits), and each SyncGroup answered
// (syncedMsg).
type slowHeartbeats struct {
	log  *slog.Logger
	over time.Duration
	mu   sync.Mutex
	last time.Time
}

func (h *slowHeartbeats) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == (&kmsg.SyncGroupRequest{}).Key() && e2e.Err() == nil {
		h.log.Info(syncedMsg, slog.Int64("at", time.Now().UnixNano()))
	}
	if key == (&kmsg.JoinGroupRequest{}).Key() && e2e.DurationE2E() > h.over {
		// No heartbeat while it waits: the leases kept count from its send.
		h.log.Warn("slow join", slog.Duration("e2e", e2e.DurationE2E()))
	}
	if key != (&kmsg.HeartbeatRequest{}).Key() || e2e.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	sent := time.Now().Add(-e2e.DurationE2E())
	gap := sent.Sub(h.last)
	if !h.last.IsZero() && gap+e2e.DurationE2E() > h.over {
		h.log.Warn("slow heartbeat", slog.Duration("e2e", e2e.DurationE2E()), slog.Duration("since_previous_send", gap))
	}
	h.last = sent
}
