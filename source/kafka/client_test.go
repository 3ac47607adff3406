package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/source/kafka"
)

// A heartbeat interval of 2/5 of the session timeout or more would let the
// leases lapse between two heartbeats: Prepare refuses it, naming both.
func TestPrepareRefusesAHeartbeatTooLongForTheSession(t *testing.T) {
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: []string{freePort(t)}, Group: "g", Topic: "t"},
		accounts, newScheduler(t, 1), codec, noop, kafka.WithLogger(quiet),
		kafka.WithClientOptions(kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(400*time.Millisecond)))
	require.NoError(t, err)
	err = k.Prepare(context.Background())
	require.ErrorIs(t, err, kafka.ErrInvalidArgument)
	require.ErrorContains(t, err, "heartbeat interval 400ms too long for the session timeout 1s")
}

// A revoke's drain and its final commit must end within the group's
// rebalance timeout, or the group removes the member mid-revoke and hands
// the partitions on while it still drains: Prepare refuses a revoke
// timeout plus commit timeout above it, naming the three settings; the
// default rebalance timeout (60 s) included.
func TestPrepareRefusesARevokeLongerThanTheRebalanceTimeout(t *testing.T) {
	cases := map[string]struct {
		opts []kafka.Option
		msg  string
	}{
		"set": {[]kafka.Option{kafka.WithClientOptions(kgo.RebalanceTimeout(10 * time.Second))},
			"revoke timeout 10s + commit timeout 10s do not fit in the rebalance timeout 10s"},
		"default": {[]kafka.Option{kafka.WithRevokeTimeout(55 * time.Second)},
			"revoke timeout 55s + commit timeout 10s do not fit in the rebalance timeout 1m0s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: []string{freePort(t)}, Group: "g", Topic: "t"},
				accounts, newScheduler(t, 1), codec, noop, append([]kafka.Option{kafka.WithLogger(quiet)}, tc.opts...)...)
			require.NoError(t, err)
			err = k.Prepare(context.Background())
			require.ErrorIs(t, err, kafka.ErrInvalidArgument)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestPrepareFailsOnUnreachableBrokers(t *testing.T) {
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: []string{freePort(t)}, Group: "g", Topic: "t"},
		accounts, newScheduler(t, 1), codec, noop, kafka.WithConnectTimeout(300*time.Millisecond), kafka.WithLogger(quiet))
	require.NoError(t, err)
	err = k.Prepare(context.Background())
	require.ErrorIs(t, err, kafka.ErrUnreachable)
	require.Equal(t, component.StateNew, k.State())
	require.ErrorIs(t, k.Start(), kafka.ErrIllegalState, "no start without a successful Prepare")
	k.ForceStop()
	<-k.Done()
	require.Equal(t, component.StateStopped, k.State())
}

func TestPrepareFailsOnAMissingTopic(t *testing.T) {
	c := startCluster(t, "present", 1)
	k := newConsumer(t, c, "g", "absent", newScheduler(t, 1), noop)
	err := k.Prepare(context.Background())
	require.ErrorIs(t, err, kafka.ErrNoTopic)
	require.Contains(t, err.Error(), `"absent"`)
	k.ForceStop()
	<-k.Done()
}
