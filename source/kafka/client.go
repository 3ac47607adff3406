package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// defaultFetchMaxWait bounds how long a fetch with no new data waits: a
// resumed partition is fetched again only after it.
const defaultFetchMaxWait = 250 * time.Millisecond

// clientOptions are the group client's: the user's, then the Consumer's,
// which must win.
func (c *Consumer[T]) clientOptions() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.sub.Brokers...),
		kgo.FetchMaxWait(defaultFetchMaxWait),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	opts = append(opts, c.cfg.client...)
	return append(opts,
		kgo.ConsumerGroup(c.sub.Group),
		kgo.ConsumeTopics(c.sub.Topic),
		kgo.DisableAutoCommit(),
		// No kgo.BlockRebalanceOnPoll: it would stop the polls while the
		// revoke callback drains. The poll loop delivers to the partitions
		// owned when a poll returned, none once released (see pollOnce).
		kgo.AdjustFetchOffsetsFn(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
		kgo.WithHooks(sessionHook[T]{c}),
	)
}

// check asks the brokers for the topic's metadata with a client of its own,
// closed before it returns.
func (c *Consumer[T]) check(ctx context.Context) error {
	opts := append([]kgo.Opt{kgo.SeedBrokers(c.sub.Brokers...)}, c.cfg.client...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("%w: consumer %q: client options: %w", ErrInvalidArgument, c.name, err)
	}
	defer cl.Close()
	session, _ := cl.OptValue(kgo.SessionTimeout).(time.Duration)
	heartbeat, _ := cl.OptValue(kgo.HeartbeatInterval).(time.Duration)
	leaseFor := session - session/5
	if 2*heartbeat >= leaseFor {
		return fmt.Errorf("%w: consumer %q: heartbeat interval %v too long for the session timeout %v: a lease lasts %v from the last heartbeat answered (keep the interval under %v, so that one late heartbeat does not lapse it)",
			ErrInvalidArgument, c.name, heartbeat, session, leaseFor, leaseFor/2)
	}
	// A revoke drains, then its final commit takes one commit timeout at
	// most past the deadline: the group waits for both within its
	// rebalance timeout before it removes the member, the partitions still
	// draining.
	rebalance, _ := cl.OptValue(kgo.RebalanceTimeout).(time.Duration)
	if c.cfg.revokeTimeout+c.cfg.commitTimeout > rebalance {
		return fmt.Errorf("%w: consumer %q: revoke timeout %v + commit timeout %v do not fit in the rebalance timeout %v (WithRevokeTimeout, WithCommitTimeout, kgo.RebalanceTimeout)",
			ErrInvalidArgument, c.name, c.cfg.revokeTimeout, c.cfg.commitTimeout, rebalance)
	}
	c.mu.Lock()
	c.leaseFor = int64(leaseFor)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.connectTimeout)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, c.sub.Topic)
	if err != nil {
		return fmt.Errorf("%w: consumer %q: brokers %v: %w", ErrUnreachable, c.name, c.sub.Brokers, err)
	}
	td, ok := topics[c.sub.Topic]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("%w: consumer %q: topic %q", ErrNoTopic, c.name, c.sub.Topic)
	case td.Err != nil:
		return fmt.Errorf("kafka: consumer %q: topic %q: %w", c.name, c.sub.Topic, td.Err)
	}
	return nil
}
