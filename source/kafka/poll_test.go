package kafka_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

// A decoder that ends the poll loop's goroutine with runtime.Goexit (what
// t.FailNow does) stops the consumer with an error, as a poll error would:
// the partitions are released, the client closed, and Done closes. The
// records of the fetch decoded before it are delivered and handled, none
// after, and the
// commit does not pass the record whose decoder did not return.
func TestADecoderGoexitStopsTheConsumer(t *testing.T) {
	c := startCluster(t, "exit", 1)
	require.NoError(t, c.Produce(context.Background(), "exit", &kgo.Record{Key: []byte("a"), Value: []byte("1")},
		&kgo.Record{Key: []byte("b"), Value: []byte("1")}, &kgo.Record{Key: []byte("a"), Value: []byte("2")},
		&kgo.Record{Key: []byte("a"), Value: []byte("exit")}, &kgo.Record{Key: []byte("b"), Value: []byte("2")}))
	j := newJournal(3)
	exiting := kafka.Codec[event]{Decode: func(key, value []byte) (event, error) {
		if string(value) == "exit" {
			runtime.Goexit()
		}
		return codec.Decode(key, value)
	}, ID: codec.ID}
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "exit"}, accounts,
		newScheduler(t, 1), exiting, j.handle, kafka.WithLogger(quiet))
	require.NoError(t, err)
	startConsumer(t, k)
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the consumer did not stop after its decoder's Goexit")
	}
	require.ErrorIs(t, k.Err(), schedulers.ErrGoexit)
	var pe *kafka.PanicError
	require.ErrorAs(t, k.Err(), &pe)
	j.wait(t, time.Second)
	assert.Equal(t, map[string][]int{"a": {1, 2}, "b": {1}}, j.seen, "the records before were handled, none after")
	assert.Equal(t, int64(3), k.Stats().Delivered)
	committed, err := c.Committed(context.Background(), "g", "exit")
	if err == nil { // no commit at all is within the bound too
		assert.LessOrEqual(t, committed[0], int64(3), "the commit does not pass offset 3, whose decoder did not return")
	}
}

// commitFinished commits offset at of topic's partition 0 for group, with
// metadata recording the offsets finished above it: what a previous owner
// that crashed left.
func commitFinished(t *testing.T, c *kafkatest.Cluster, group, topic string, at int64, finished ...partition.Span) {
	t.Helper()
	meta, _, err := partition.FinishedMap{Base: at, Spans: finished}.Encode(0)
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1, Metadata: meta})
	resp, err := kadm.NewClient(cl).CommitOffsets(ctxTimeout(t, 10*time.Second), group, os)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
}

// A record the commit's finished map skips and bad records in the middle
// of a fetch: what came before each is delivered before it is tracked (the
// bad-record hook sees it delivered), so the tracker sees the offsets in
// order; every record is handled, skipped or discarded once, each
// aggregate's in order, and the commit passes them all.
func TestSkippedAndBadRecordsAmidAFetchKeepItsOrder(t *testing.T) {
	c := startCluster(t, "cut", 1)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "cut",
		&kgo.Record{Key: []byte("a"), Value: []byte("1")},   // 0
		&kgo.Record{Key: []byte("b"), Value: []byte("1")},   // 1
		&kgo.Record{Key: []byte("c"), Value: []byte("1")},   // 2: finished by a previous owner
		&kgo.Record{Value: []byte("1")},                     // 3: no key
		&kgo.Record{Key: []byte("a"), Value: []byte("2")},   // 4
		&kgo.Record{Key: []byte("a"), Value: []byte("two")}, // 5: not decodable
		&kgo.Record{Key: []byte("b"), Value: []byte("2")},   // 6
		&kgo.Record{Key: []byte("c"), Value: []byte("2")},   // 7
		&kgo.Record{Key: []byte("a"), Value: []byte("3")},   // 8
	))
	commitFinished(t, c, "g", "cut", 0, partition.Span{First: 2, Last: 2})
	var k *kafka.Consumer[event]
	var mu sync.Mutex
	deliveredAt := map[int64]int64{} // bad record's offset: records delivered when the hook saw it
	hook := func(_ context.Context, r *kgo.Record, _ error) error {
		mu.Lock()
		defer mu.Unlock()
		deliveredAt[r.Offset] = k.Stats().Delivered
		return nil
	}
	j := newJournal(6)
	k = newConsumer(t, c, "g", "cut", newScheduler(t, 2), j.handle, kafka.WithBadRecordHook(hook))
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	stop(t, k)

	assert.Equal(t, map[string][]int{"a": {1, 2, 3}, "b": {1, 2}, "c": {2}}, j.seen)
	mu.Lock()
	assert.Equal(t, map[int64]int64{3: 2, 5: 3}, deliveredAt, "the run before a bad record is delivered before the hook sees it")
	mu.Unlock()
	s := k.Stats()
	assert.Equal(t, int64(6), s.Delivered)
	assert.Equal(t, int64(1), s.Skipped)
	assert.Equal(t, int64(2), s.Discarded)
	committed, err := c.Committed(ctx, "g", "cut")
	require.NoError(t, err)
	assert.Equal(t, map[int32]int64{0: 9}, committed, "the commit passes every record")
}

// The poll loop runs user code other than the decoder too: the codec's ID
// (through the partition's intake) and the bad-record hook. Each that ends
// the loop's goroutine with runtime.Goexit stops the consumer with an
// error; the records before are handled, none after, and the commit does
// not pass the record whose user code did not return.
func TestAnIDOrBadRecordHookGoexitStopsTheConsumer(t *testing.T) {
	cases := map[string]func(cd *kafka.Codec[event]) []kafka.Option{
		"Codec.ID": func(cd *kafka.Codec[event]) []kafka.Option {
			cd.ID = func(e event) string {
				if e.Seq == 3 {
					runtime.Goexit()
				}
				return e.ID
			}
			return nil
		},
		"bad-record hook": func(cd *kafka.Codec[event]) []kafka.Option {
			cd.Decode = func(key, value []byte) (event, error) {
				e, err := codec.Decode(key, value)
				if err == nil && e.Seq == 3 {
					err = errors.New("refused")
				}
				return e, err
			}
			return []kafka.Option{kafka.WithBadRecordHook(func(context.Context, *kgo.Record, error) error {
				runtime.Goexit()
				return nil
			})}
		},
	}
	for name, setUp := range cases {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, "exit", 1)
			var rs []*kgo.Record
			for seq := 1; seq <= 5; seq++ {
				rs = append(rs, &kgo.Record{Key: []byte("a"), Value: []byte(strconv.Itoa(seq))})
			}
			require.NoError(t, c.Produce(context.Background(), "exit", rs...))
			cd := codec
			opts := append(setUp(&cd), kafka.WithLogger(quiet))
			var mu sync.Mutex
			var seen []int
			handler := func(_ context.Context, d partition.Delivery[event]) error {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, d.Exchange.Seq)
				return nil
			}
			k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "exit"}, accounts,
				newScheduler(t, 1), cd, handler, opts...)
			require.NoError(t, err)
			startConsumer(t, k)
			select {
			case <-k.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the consumer did not stop after the Goexit")
			}
			require.ErrorIs(t, k.Err(), schedulers.ErrGoexit)
			mu.Lock()
			assert.Equal(t, []int{1, 2}, seen, "the records before were handled, none after")
			mu.Unlock()
			committed, err := c.Committed(context.Background(), "g", "exit")
			if err == nil { // no commit at all is within the bound too
				assert.LessOrEqual(t, committed[0], int64(2), "the commit does not pass offset 2, whose user code did not return")
			}
		})
	}
}

// describe returns the group's members and the partitions of topic the
// group assigned them, as the broker describes them.
func describe(t *testing.T, c *kafkatest.Cluster, group, topic string) (members int, assigned map[int32]bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	ds, err := kadm.NewClient(cl).DescribeGroups(ctxTimeout(t, 10*time.Second), group)
	require.NoError(t, err)
	g := ds[group]
	assigned = map[int32]bool{}
	for p := range g.AssignedPartitions()[topic] {
		assigned[p] = true
	}
	return len(g.Members), assigned
}

// holdPoll is a client hook that, once armed, holds the poll that returns
// the next record (on the polling goroutine, before the poll returns)
// until let go.
type holdPoll struct {
	armed  atomic.Bool
	held   chan struct{} // closed once a poll is held
	letGo  chan struct{}
	closed sync.Once
}

func (h *holdPoll) OnFetchRecordUnbuffered(_ *kgo.Record, polled bool) {
	if polled && h.armed.CompareAndSwap(true, false) {
		close(h.held)
		<-h.letGo
	}
}

func (h *holdPoll) release() { h.closed.Do(func() { close(h.letGo) }) }

// A poll returns a batch of the one partition, and before the poll loop
// sees it the partition is revoked (an eager balancer revokes everything
// when a member joins) and assigned back to the member, from its final
// commit: the batch is of the old assignment and must not go to the new
// one, which reads the same records from the commit. Every record is
// handled once, in order, and the consumer does not fail.
func TestABatchPolledBeforeARevokeNeverGoesToTheNextAssignment(t *testing.T) {
	const keys, perKey = 20, 50
	c := startCluster(t, "held", 1, shortSessions)
	require.NoError(t, c.Produce(context.Background(), "held", records(keys, perKey)...))
	hook := &holdPoll{held: make(chan struct{}), letGo: make(chan struct{})}
	t.Cleanup(hook.release)
	j := newJournal(keys * perKey)
	var handled atomic.Int64
	eager := kgo.Balancers(kgo.RoundRobinBalancer())
	opts := []kafka.Option{kafka.WithRevokeTimeout(2 * time.Second), kafka.WithMaxPollRecords(20),
		kafka.WithMaxPending(20)}
	sched := newScheduler(t, 8)
	a := newConsumer(t, c, "held", "held", sched, func(ctx context.Context, d partition.Delivery[event]) error {
		handled.Add(1)
		return j.handle(ctx, d)
	}, append(opts, kafka.WithClientOptions(append(memberClientOptions, eager, kgo.WithHooks(hook))...))...)
	startConsumer(t, a)
	require.Eventually(t, func() bool { return handled.Load() >= 100 }, 20*time.Second, time.Millisecond, "a handles some")
	hook.armed.Store(true)
	select {
	case <-hook.held:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "no poll held")
	}

	// b joins: a's partition is revoked, then assigned to a or to b; b
	// leaves: it is a's again.
	b := newConsumer(t, c, "held", "held", sched, j.handle, append(opts, kafka.WithClientOptions(append(memberClientOptions, eager)...))...)
	startConsumer(t, b)
	require.Eventually(t, func() bool { return a.Stats().Revoked >= 1 }, 20*time.Second, time.Millisecond, "a's partition revoked")
	require.Eventually(t, func() bool {
		members, assigned := describe(t, c, "held", "held")
		return members == 2 && len(assigned) == 1
	}, 20*time.Second, 10*time.Millisecond, "the group assigned the partition again")
	bOwned := len(b.Owned()) == 1
	stop(t, b)
	// The assignment back to a waits for the held poll to return: a
	// consumer that would let the old batch go to the new assignment has
	// made it within a second.
	early := false
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(time.Second); !early; {
		select {
		case <-tick.C:
			early = len(a.Owned()) == 1
			continue
		case <-deadline:
		}
		break
	}
	hook.release()
	select {
	case <-j.all:
	case <-a.Done():
		require.FailNow(t, "a stopped", "%v (assigned again while a poll was held: %v)", a.Err(), early)
	case <-time.After(30 * time.Second):
		require.FailNow(t, "timed out", "assigned again while a poll was held: %v", early)
	}
	require.Eventually(t, func() bool { return len(a.Owned()) == 1 }, 20*time.Second, time.Millisecond, "a owns the partition again")
	stop(t, a)
	t.Logf("b was given the partition: %v; a assigned it again while a poll was held: %v; a: %+v", bOwned, early, a.Stats())
	require.NoError(t, a.Err())
	require.Zero(t, j.check(t, keys, perKey), "nothing handled twice")
}

// badRecords has a record without a key and one whose value does not
// decode between good ones, all in one partition.
func badRecords() []*kgo.Record {
	return []*kgo.Record{
		{Key: []byte("a"), Value: []byte("1")},
		{Value: []byte("2")}, // no key
		{Key: []byte("a"), Value: []byte("two")},
		{Key: []byte("a"), Value: []byte("2")},
	}
}

// reasons collects what the bad-record hook was told.
type reasons struct {
	mu      sync.Mutex
	offsets []int64
	errs    []error
}

func (r *reasons) hook(result error) kafka.BadRecordHook {
	return func(_ context.Context, rec *kgo.Record, reason error) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.offsets = append(r.offsets, rec.Offset)
		r.errs = append(r.errs, reason)
		return result
	}
}

// Bad records are discarded with their reason, counted, and committed past;
// the good ones around them are handled.
func TestBadRecordsAreDiscardedWithTheReason(t *testing.T) {
	c := startCluster(t, "bad", 1)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "bad", badRecords()...))
	var r reasons
	j := newJournal(2)
	k := newConsumer(t, c, "g", "bad", newScheduler(t, 2), j.handle, kafka.WithBadRecordHook(r.hook(nil)))
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	stop(t, k)

	require.Equal(t, map[string][]int{"a": {1, 2}}, j.seen)
	require.Equal(t, []int64{1, 2}, r.offsets)
	require.ErrorIs(t, r.errs[0], kafka.ErrNoKey)
	require.ErrorIs(t, r.errs[1], kafka.ErrDecode)
	require.Contains(t, r.errs[1].Error(), `sequence "two"`, "the decoder's error is kept")
	require.Equal(t, int64(2), k.Stats().Discarded)
	require.Equal(t, int64(2), k.Stats().Delivered)
	committed, err := c.Committed(ctx, "g", "bad")
	require.NoError(t, err)
	require.Equal(t, map[int32]int64{0: 4}, committed)
}

// A hook that refuses a bad record stops the consumer with an error that
// names the reason; nothing after the bad record is handled or committed.
func TestABadRecordTheHookRefusesStopsTheConsumer(t *testing.T) {
	c := startCluster(t, "bad", 1)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "bad", badRecords()...))
	var r reasons
	poison := errors.New("poison")
	var mu sync.Mutex
	var seen []int
	k := newConsumer(t, c, "g", "bad", newScheduler(t, 2), func(_ context.Context, d partition.Delivery[event]) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, d.Exchange.Seq)
		return nil
	}, kafka.WithBadRecordHook(r.hook(poison)))
	startConsumer(t, k)
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the consumer did not stop")
	}
	err := k.Err()
	require.ErrorIs(t, err, kafka.ErrBadRecord)
	require.ErrorIs(t, err, kafka.ErrNoKey)
	require.ErrorIs(t, err, poison)
	require.Equal(t, []int{1}, seen)
	committed, cerr := c.Committed(ctx, "g", "bad")
	require.NoError(t, cerr)
	require.Equal(t, map[int32]int64{0: 1}, committed, "committed up to the bad record, not past it")
}

// A decoder's panic is the record's decode failure, as a *PanicError.
func TestADecoderPanicIsADecodeFailure(t *testing.T) {
	c := startCluster(t, "bad", 1)
	ctx := context.Background()
	require.NoError(t, c.Produce(ctx, "bad", &kgo.Record{Key: []byte("a"), Value: []byte("boom")},
		&kgo.Record{Key: []byte("a"), Value: []byte("1")}))
	var r reasons
	j := newJournal(1)
	panicky := kafka.Codec[event]{Decode: func(key, value []byte) (event, error) {
		if string(value) == "boom" {
			panic("boom")
		}
		return codec.Decode(key, value)
	}, ID: codec.ID}
	k, err := kafka.NewConsumer("c", kafka.Subscription{Brokers: c.Addrs(), Group: "g", Topic: "bad"}, accounts,
		newScheduler(t, 1), panicky, j.handle, kafka.WithLogger(quiet), kafka.WithBadRecordHook(r.hook(nil)))
	require.NoError(t, err)
	startConsumer(t, k)
	j.wait(t, 20*time.Second)
	stop(t, k)
	require.Len(t, r.errs, 1)
	require.ErrorIs(t, r.errs[0], kafka.ErrDecode)
	var pe *kafka.PanicError
	require.ErrorAs(t, r.errs[0], &pe)
	require.Equal(t, "boom", pe.Value)
}

// A session timeout outside the broker's group.min/max.session.timeout.ms
// (kfake's minimum is 6 s by default) is refused at every JoinGroup: the
// consumer fails with Err naming the setting and the broker's code, instead
// of warning about it for ever with nothing assigned.
func TestRefusedSessionTimeoutFailsTheConsumer(t *testing.T) {
	c := startCluster(t, "refused", 1)
	k := newConsumer(t, c, "refused", "refused", newScheduler(t, 1), noop,
		kafka.WithClientOptions(kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond)))
	startConsumer(t, k)
	select {
	case <-k.Done():
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the consumer did not stop on a refused session timeout", "owned %v, err %v", k.Owned(), k.Err())
	}
	err := k.Err()
	t.Log(err)
	require.ErrorIs(t, err, kafka.ErrRefused)
	require.ErrorContains(t, err, "session timeout 1s")
	require.ErrorContains(t, err, "INVALID_SESSION_TIMEOUT")
	require.ErrorIs(t, k.StopGracefully(context.Background()), kafka.ErrRefused, "a stop after the end returns Err")
}
