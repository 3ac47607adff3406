package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch/middleware"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

// deposit is the example's exchange: an amount for one account, whose id
// is the record's key.
type deposit struct {
	account string
	amount  int
}

var deposits = kafka.Codec[deposit]{
	Decode: func(key, value []byte) (deposit, error) {
		n, err := strconv.Atoi(string(value))
		return deposit{account: string(key), amount: n}, err
	},
	ID: func(d deposit) string { return d.account },
}

// produceDeposits writes three deposits to each of alice, bob and carol.
func produceDeposits(c *kafkatest.Cluster, topic string) error {
	var rs []*kgo.Record
	for _, amount := range []string{"10", "20", "30"} {
		for _, name := range []string{"alice", "bob", "carol"} {
			rs = append(rs, &kgo.Record{Key: []byte(name), Value: []byte(amount)})
		}
	}
	return c.Produce(context.Background(), topic, rs...)
}

// ledger is a handler's store: each account's deposits in the order
// applied; done closes after want of them.
type ledger struct {
	mu      sync.Mutex
	history map[string][]int
	n, want int
	done    chan struct{}
}

func newLedger(want int) *ledger {
	return &ledger{history: map[string][]int{}, want: want, done: make(chan struct{})}
}

func (l *ledger) apply(_ context.Context, d partition.Delivery[deposit]) error {
	l.record(d.Exchange)
	return nil
}

func (l *ledger) record(d deposit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.history[d.account] = append(l.history[d.account], d.amount)
	if l.n++; l.n == l.want {
		close(l.done)
	}
}

func (l *ledger) print() {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.history))
	for name := range l.history {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Println(name, l.history[name])
	}
}

// consume runs a consumer of topic with handler until the ledger has all it
// wants, then stops it gracefully.
func consume(c *kafkatest.Cluster, topic string, l *ledger, handler func(context.Context, partition.Delivery[deposit]) error) (*kafka.Consumer[deposit], error) {
	sched, err := schedulers.NewParallel("deposits", 4)
	if err != nil {
		return nil, err
	}
	defer sched.Dispose()
	k, err := kafka.NewConsumer("deposits", kafka.Subscription{Brokers: c.Addrs(), Group: "ledger", Topic: topic},
		accounts, sched, deposits, handler, kafka.WithLogger(quiet))
	if err != nil {
		return nil, err
	}
	if err := k.Prepare(context.Background()); err != nil {
		return nil, err
	}
	if err := k.Start(); err != nil {
		return nil, err
	}
	<-l.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return k, k.StopGracefully(ctx)
}

// depositCluster starts a fake cluster with the topic "deposits" of
// partitions partitions (and the topics of opts) holding three deposits to
// each of alice, bob and carol; the caller closes it.
func depositCluster(partitions int32, opts ...kafkatest.Option) *kafkatest.Cluster {
	c, err := kafkatest.Start(append([]kafkatest.Option{kafkatest.WithTopic("deposits", partitions)}, opts...)...)
	if err != nil {
		panic(err)
	}
	if err := produceDeposits(c, "deposits"); err != nil {
		c.Close()
		panic(err)
	}
	return c
}

// A consumer group member reading a topic of two partitions: each
// account's deposits are applied in order, accounts concurrently, and on
// the graceful stop the end of each partition is committed.
func ExampleNewConsumer() {
	c := depositCluster(2)
	defer c.Close()
	l := newLedger(9)
	if _, err := consume(c, "deposits", l, l.apply); err != nil {
		panic(err)
	}
	l.print()
	committed, _ := c.Committed(context.Background(), "ledger", "deposits")
	fmt.Println("committed:", committed[0]+committed[1], "records")
	// Output:
	// alice [10 20 30]
	// bob [10 20 30]
	// carol [10 20 30]
	// committed: 9 records
}

// A failed deposit is retried with backoff inside its group, so bob's next
// deposit waits for it; one that keeps failing goes to a dead-letter topic
// and carol's deposits go on past it. The partition's commits never pass a
// deposit still being retried.
func Example_retryAndDeadLetter() {
	c := depositCluster(1, kafkatest.WithTopic("deposits.dead", 1))
	defer c.Close()
	l := newLedger(9)
	failures := map[deposit]int{{"bob", 20}: 2, {"carol", 20}: 99} // bob's store fails twice
	var mu sync.Mutex
	store := func(_ context.Context, d partition.Delivery[deposit]) error {
		mu.Lock()
		defer mu.Unlock()
		if failures[d.Exchange] > 0 {
			failures[d.Exchange]--
			return errors.New("store unavailable")
		}
		l.record(d.Exchange)
		return nil
	}
	retry, err := middleware.Retry[partition.Delivery[deposit]](
		middleware.WithBackOff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }),
		middleware.WithMaxTries(3))
	if err != nil {
		panic(err)
	}
	var parked []string
	deadLetter, err := middleware.DeadLetter(func(ctx context.Context, d partition.Delivery[deposit], cause error) error {
		parked = append(parked, fmt.Sprintf("%s %d (offset %d): %v", d.Exchange.account, d.Exchange.amount, d.Position, cause))
		defer l.record(deposit{"dead letters", 1})
		return c.Produce(ctx, "deposits.dead", &kgo.Record{Key: []byte(d.Exchange.account), Value: []byte(strconv.Itoa(d.Exchange.amount))})
	})
	if err != nil {
		panic(err)
	}
	if _, err := consume(c, "deposits", l, middleware.Chain(store, deadLetter, retry)); err != nil {
		panic(err)
	}
	l.print()
	fmt.Println(parked)
	// Output:
	// alice [10 20 30]
	// bob [10 20 30]
	// carol [10 30]
	// dead letters [1]
	// [carol 20 (offset 5): middleware: retries exhausted after attempt 3: store unavailable]
}

// A Consumer is a component.Component: a Runtime prepares, starts and stops
// it, and owns the scheduler supplier it borrows from (here bounded elastic
// schedulers, for handlers that block on I/O).
func ExampleConsumer_runtime() {
	c := depositCluster(2)
	defer c.Close()
	sup, err := aggregate.NewSchedulerSupplier("bank", aggregate.WithParallelism(256),
		aggregate.WithSchedulerFactory(func(name string, n int) (schedulers.Scheduler, error) {
			return schedulers.NewBoundedElastic(name, n)
		}))
	if err != nil {
		panic(err)
	}
	sched, err := sup.GetOrInitialize(accounts)
	if err != nil {
		panic(err)
	}
	l := newLedger(9)
	k, err := kafka.NewConsumer("deposits", kafka.Subscription{Brokers: c.Addrs(), Group: "ledger", Topic: "deposits"},
		accounts, sched, deposits, l.apply, kafka.WithLogger(quiet))
	if err != nil {
		panic(err)
	}
	rt, err := component.NewRuntime("bank", []component.Component{k}, component.WithOwned(sup))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- rt.Run(ctx) }()
	<-l.done
	cancel() // Run stops the consumer gracefully, then the supplier
	fmt.Println("run:", <-ran)
	l.print()
	// Output:
	// run: <nil>
	// alice [10 20 30]
	// bob [10 20 30]
	// carol [10 20 30]
}

// fencedStore is a store that fences its writes on the lease: it keeps,
// per partition, the highest epoch that wrote, and refuses a write of a
// lower one, a stalled old owner's after the next owner began.
type fencedStore struct {
	mu     sync.Mutex
	epochs map[int32]uint64
	ledger *ledger
}

var errStaleEpoch = errors.New("stale epoch")

func (s *fencedStore) apply(ctx context.Context, d partition.Delivery[deposit]) error {
	l, ok := kafka.LeaseOf(ctx)
	if !ok {
		return errors.New("no lease")
	}
	return s.write(l, d.Exchange)
}

func (s *fencedStore) write(l kafka.Lease, d deposit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Epoch < s.epochs[l.Partition] {
		return fmt.Errorf("%w: partition %d, epoch %d below %d", errStaleEpoch, l.Partition, l.Epoch, s.epochs[l.Partition])
	}
	s.epochs[l.Partition] = l.Epoch
	s.ledger.record(d)
	return nil
}

// A handler's store fences its writes on the partition's lease, the
// group's generation at the assignment: a member that the group fenced
// (stopped past its session timeout, say) writes under an epoch below its
// successor's, and the store refuses it.
func ExampleLeaseOf() {
	c := depositCluster(1)
	defer c.Close()
	l := newLedger(9)
	s := &fencedStore{epochs: map[int32]uint64{}, ledger: l}
	if _, err := consume(c, "deposits", l, s.apply); err != nil {
		panic(err)
	}
	l.print()
	// The write of an owner of the generation before.
	err := s.write(kafka.Lease{Partition: 0, Epoch: s.epochs[0] - 1}, deposit{account: "alice", amount: 99})
	fmt.Println("stale write refused:", errors.Is(err, errStaleEpoch))
	// Output:
	// alice [10 20 30]
	// bob [10 20 30]
	// carol [10 20 30]
	// stale write refused: true
}
