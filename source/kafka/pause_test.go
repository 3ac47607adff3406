package kafka_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
)

// A partition whose handlers are stuck is paused once its pending records
// reach its share of the budget; the other partition's records keep being
// delivered and handled meanwhile, and the stuck one resumes once its
// handlers go on. The records pending stay within the budget plus one
// polled batch.
func TestASlowPartitionIsPausedAndTheOthersGoOn(t *testing.T) {
	const keys, perKey, budget, batch = 100, 10, 20, 10
	c := startCluster(t, "pause", 2)
	ctx := context.Background()
	rs := records(keys, perKey)
	require.NoError(t, c.Produce(ctx, "pause", rs...))
	inOne := 0
	for _, r := range rs {
		if r.Partition == 1 {
			inOne++
		}
	}
	require.Positive(t, inOne)
	require.Less(t, inOne, len(rs))

	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	j := newJournal(len(rs))
	one := newJournal(inOne)
	k := newConsumer(t, c, "g", "pause", newScheduler(t, 4), func(ctx context.Context, d partition.Delivery[event]) error {
		if d.Partition == 0 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			one.add(d.Exchange)
		}
		j.add(d.Exchange)
		return nil
	}, kafka.WithMaxPending(budget), kafka.WithMaxPollRecords(batch),
		kafka.WithGroups(2), // partition 0 holds 2 of the 4 goroutines
		// A resumed partition is fetched once the fetch in flight for the
		// other one (which has nothing new) returns: keep that wait short.
		kafka.WithClientOptions(kgo.FetchMaxWait(20*time.Millisecond)))
	startConsumer(t, k)

	one.wait(t, 20*time.Second) // every record of partition 1, partition 0 stuck
	// Partition 0's fetches may still be on their way when partition 1 ends
	// (under load its share fills later): wait until it is full.
	require.Eventually(t, func() bool { return k.Stats().Delivered-int64(inOne) >= budget/2 },
		20*time.Second, time.Millisecond, "partition 0 filled its share")
	stuck := k.Stats().Delivered - int64(inOne)
	require.LessOrEqual(t, stuck, int64(budget+batch), "partition 0 was paused")

	once.Do(func() { close(release) })
	j.wait(t, 20*time.Second)
	stop(t, k)
	require.Zero(t, j.check(t, keys, perKey))
}

// One record held (its handler blocks) at the bottom of a partition whose
// backlog is far above the bound: the records held above the committed
// offset, finished or not, never exceed the bound plus one polled batch,
// the partition is paused, the other partition is handled to its end
// meanwhile, and once the held record finishes everything is handled in
// order and committed to the end.
func TestAStuckRecordHoldsNoMoreThanTheBound(t *testing.T) {
	const keys, perKey, bound, batch = 100, 40, 200, 50
	c := startCluster(t, "bound", 2)
	ctx := context.Background()
	rs := records(keys, perKey)
	require.NoError(t, c.Produce(ctx, "bound", rs...))
	var inZero, inOne int
	for _, r := range rs {
		if r.Partition == 0 {
			inZero++
		} else {
			inOne++
		}
	}
	require.Greater(t, inZero, 4*(bound+batch), "a backlog far above the bound")
	require.Positive(t, inOne)

	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var highest atomic.Int64 // the highest offset of partition 0 handled while offset 0 is held
	j := newJournal(len(rs))
	one := newJournal(inOne)
	var mu sync.Mutex
	committed := map[int32]int64{}
	k := newConsumer(t, c, "g", "bound", newScheduler(t, 4), func(ctx context.Context, d partition.Delivery[event]) error {
		switch {
		case d.Partition == 0 && d.Position == 0:
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		case d.Partition == 0:
			select {
			case <-release:
			default:
				highest.Store(max(highest.Load(), d.Position))
			}
		default:
			one.add(d.Exchange)
		}
		j.add(d.Exchange)
		return nil
	}, kafka.WithMaxHeld(bound, 0), kafka.WithMaxPollRecords(batch),
		kafka.WithClientOptions(kgo.FetchMaxWait(20*time.Millisecond)),
		kafka.WithCommitHook(func(p int32, offset int64) {
			mu.Lock()
			committed[p] = offset
			mu.Unlock()
		}))
	startConsumer(t, k)

	one.wait(t, 30*time.Second) // every record of partition 1, partition 0 held
	// Partition 0 reached its bound and was paused (partition 1 may have
	// been paused too, for a moment, by handlers behind its fetch).
	require.Eventually(t, func() bool {
		st := k.Stats()
		return st.Delivered-int64(inOne) >= bound && st.Pauses > 0
	}, 20*time.Second, 5*time.Millisecond, "partition 0 filled its bound and paused")
	held := k.Stats().Delivered - int64(inOne)
	require.LessOrEqual(t, held, int64(bound+batch), "records held above the committed offset")
	require.Less(t, highest.Load()+1, int64(bound+batch), "the highest offset handled above the held one")

	once.Do(func() { close(release) })
	j.wait(t, 30*time.Second)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return committed[0] == int64(inZero) && committed[1] == int64(inOne)
	}, 20*time.Second, 5*time.Millisecond, "committed to the end")
	stop(t, k)
	require.Zero(t, j.check(t, keys, perKey))
}

// The memory a stuck record costs, measured on a consumer process of its
// own (the broker, kfake, runs in the test's): run with
// AGGFLOW_KAFKA_RSS_RECORDS=3000000 (and AGGFLOW_KAFKA_RSS_PARTITIONS, 1 by
// default: the whole backlog above the held record).
const (
	rssRecordsEnv    = "AGGFLOW_KAFKA_RSS_RECORDS"
	rssPartitionsEnv = "AGGFLOW_KAFKA_RSS_PARTITIONS"
	rssStuckEnv      = "AGGFLOW_KAFKA_CHILD_STUCK" // "1": the record at offset 0 of partition 0 is held
	rssHeldEnv       = "AGGFLOW_KAFKA_CHILD_HELD"  // WithMaxHeld's records, 0: no bound (as before WithMaxHeld)
)

// rssReport is what an "rss" child writes to stdout, one JSON line.
type rssReport struct {
	Base, Peak, HWM int64 // VmRSS before the consumer, the highest sampled while measured, VmHWM (bytes)
	Held            int64 // partition 0's records delivered while the held record ran (stuck runs)
	Pauses          int64
	Handled         int64
	Seconds         float64 // to the measurement's end
}

func TestStuckRecordRSS(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(rssRecordsEnv))
	if err != nil {
		t.Skip("a measurement: set " + rssRecordsEnv)
	}
	partitions := int32(1)
	if p, err := strconv.Atoi(os.Getenv(rssPartitionsEnv)); err == nil {
		partitions = int32(p)
	}
	c := startCluster(t, "rss", partitions)
	ctx := context.Background()
	const chunk = 100_000
	for from := 0; from < n; from += chunk {
		rs := make([]*kgo.Record, 0, chunk)
		for i := from; i < min(n, from+chunk); i++ {
			rs = append(rs, &kgo.Record{Key: []byte("acct-" + strconv.Itoa(i%1000)), Value: []byte(strconv.Itoa(i/1000 + 1))})
		}
		require.NoError(t, c.Produce(ctx, "rss", rs...))
	}
	run := func(group string, stuck bool, held int) rssReport {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=rss", brokersEnv+"="+strings.Join(c.Addrs(), ","), groupEnv+"="+group,
			topicEnv+"=rss", rssStuckEnv+"="+map[bool]string{true: "1"}[stuck], rssHeldEnv+"="+strconv.Itoa(held),
			rssRecordsEnv+"="+strconv.Itoa(n))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if os.Getenv("RSS_DEBUG") != "" {
			cmd.Stderr = os.Stderr
		}
		require.NoError(t, cmd.Run(), errOut.String())
		var r rssReport
		require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
		return r
	}
	mb := func(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
	free := run("free", false, partition.DefaultMaxHeldRecords)
	t.Logf("%d records, %d partitions", n, partitions)
	t.Logf("no record held:            base %s, peak RSS %s, VmHWM %s, %.1f s", mb(free.Base), mb(free.Peak), mb(free.HWM), free.Seconds)
	before := run("before", true, 0)
	t.Logf("one held, no bound:        peak RSS %s, VmHWM %s, %d records held, %d pauses, %.1f s",
		mb(before.Peak), mb(before.HWM), before.Held, before.Pauses, before.Seconds)
	after := run("after", true, partition.DefaultMaxHeldRecords)
	t.Logf("one held, default bound:   peak RSS %s, VmHWM %s, %d records held, %d pauses, %.1f s",
		mb(after.Peak), mb(after.HWM), after.Held, after.Pauses, after.Seconds)
	require.LessOrEqual(t, after.Held, int64(partition.DefaultMaxHeldRecords+1000), "held within the bound and a polled batch")
	require.LessOrEqual(t, after.Peak, 2*free.Peak, "RSS with a record held within 2x the RSS without")
}

// runRSSChild consumes the backlog of rssRecordsEnv records and reports
// its memory (rssReport); a stuck run holds partition 0's first record
// until its delivered count stays still for 3 s (paused, or all
// delivered), then lets it go and consumes to the end.
func runRSSChild() int {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	n, _ := strconv.ParseInt(os.Getenv(rssRecordsEnv), 10, 64)
	stuck := os.Getenv(rssStuckEnv) == "1"
	held, _ := strconv.Atoi(os.Getenv(rssHeldEnv))
	if held == 0 {
		held = math.MaxInt32
	}
	var r rssReport
	r.Base = vmKB("VmRSS")
	sched, err := schedulers.NewParallel("rss", 8)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	release := make(chan struct{})
	var handled, others atomic.Int64
	all := make(chan struct{})
	handle := func(ctx context.Context, d partition.Delivery[event]) error {
		if stuck && d.Partition == 0 && d.Position == 0 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		} else if d.Partition != 0 {
			others.Add(1)
		}
		if handled.Add(1) == n {
			close(all)
		}
		return nil
	}
	sub := kafka.Subscription{Brokers: strings.Split(os.Getenv(brokersEnv), ","), Group: os.Getenv(groupEnv), Topic: os.Getenv(topicEnv)}
	k, err := kafka.NewConsumer("rss", sub, accounts, sched, codec, handle, kafka.WithLogger(quiet),
		kafka.WithMaxHeld(held, 0))
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
	began := time.Now()
	tick := time.NewTicker(20 * time.Millisecond) // sampling the process's RSS
	defer tick.Stop()
	last, still := int64(-1), time.Now()
measure:
	for {
		select {
		case <-tick.C:
		case <-all:
			break measure
		case <-k.Done():
			fmt.Fprintln(os.Stderr, "consumer ended:", k.Err())
			return 1
		case <-ctx.Done():
			return 1
		}
		r.Peak = max(r.Peak, vmKB("VmRSS"))
		if os.Getenv("RSS_DEBUG") != "" {
			fmt.Fprintln(os.Stderr, k.Stats().Delivered, handled.Load(), k.Stats().Pauses, r.Peak)
		}
		if d := k.Stats().Delivered; d != last {
			last, still = d, time.Now()
		} else if stuck && time.Since(still) > 3*time.Second {
			r.Held = d - others.Load()
			break measure
		}
	}
	r.Seconds = time.Since(began).Seconds()
	r.HWM = vmKB("VmHWM")
	r.Pauses = k.Stats().Pauses
	close(release)
	<-all
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer stopCancel()
	if err := k.StopGracefully(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		return 1
	}
	r.Handled = handled.Load()
	if err := sched.DisposeGracefully(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "dispose:", err)
		return 1
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	return 0
}

// vmKB returns the field of /proc/self/status, in bytes (0 if unknown).
func vmKB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
