package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
	"github.com/aggflow/aggflow/source/jetstream/jstest"
)

// deposit is the exchange of the examples: an amount for an account.
type deposit struct {
	Account string
	Amount  int
}

// depositCodec decodes a deposit: the account is the message's KeyHeader, the
// amount its payload.
var depositCodec = jetstream.Codec[deposit]{
	Decode: func(key string, msg natsjs.Msg) (deposit, error) {
		amount, err := strconv.Atoi(string(msg.Data()))
		return deposit{Account: key, Amount: amount}, err
	},
	ID: func(d deposit) string { return d.Account },
}

// ledger is the handler's store: each account's balance and the position
// of the last deposit applied to it. A real store keeps both in one
// transaction.
type ledger struct {
	mu       sync.Mutex
	balance  map[string]int
	applied  map[string]int64 // the last position applied, per account
	skipped  int
	handled  int
	progress chan struct{} // receives after each exchange
}

// apply is idempotent by position: after a crash the partition is
// delivered again from the last position acknowledged, in order, so an
// account sees again the deposits it applied after that position, in the
// same order; a position at or below the last one applied is one of them.
func (l *ledger) apply(_ context.Context, d partition.Delivery[deposit]) error {
	l.mu.Lock()
	defer func() {
		l.handled++
		l.mu.Unlock()
		l.progress <- struct{}{}
	}()
	if d.Position <= l.applied[d.Exchange.Account] {
		l.skipped++ // an in-order replay: applied before the crash
		return nil
	}
	l.balance[d.Exchange.Account] += d.Exchange.Amount
	l.applied[d.Exchange.Account] = d.Position
	return nil
}

// run consumes every partition until n exchanges were handled, then stops
// gracefully.
func (l *ledger) run(js natsjs.JetStream, topo jetstream.Topology, n int) {
	sched, err := schedulers.NewParallel("accounts", 2)
	if err != nil {
		log.Fatal(err)
	}
	defer sched.Dispose()
	accounts := aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}
	c, err := jetstream.NewConsumer("ledger", jetstream.Subscription{JetStream: js, Topology: topo, Owned: []int32{0, 1}},
		accounts, sched, depositCodec, l.apply)
	if err != nil {
		log.Fatal(err)
	}
	r, err := component.NewRuntime("ledger", []component.Component{c}, component.WithShutdownTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Prepare(context.Background()); err != nil {
		log.Fatal(err)
	}
	if err := r.Start(); err != nil {
		log.Fatal(err)
	}
	for range n {
		<-l.progress
	}
	if err := r.StopGracefully(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// depositsServer starts an embedded server with a stream of two
// partitions holding deposits, in order; end shuts it down.
func depositsServer(deposits []deposit) (js natsjs.JetStream, topo jetstream.Topology, end func()) {
	srv, err := jstest.Start()
	if err != nil {
		log.Fatal(err)
	}
	nc, js, err := jetstream.Connect(srv.URL())
	if err != nil {
		log.Fatal(err)
	}
	end = func() { nc.Close(); srv.Shutdown() }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topo = jetstream.Topology{Stream: "DEPOSITS", Prefix: "deposits", Partitions: 2}
	cfg, _ := topo.StreamConfig()
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		log.Fatal(err)
	}
	for _, d := range deposits {
		if _, err := js.PublishMsg(ctx, topo.NewMsg(d.Account, []byte(strconv.Itoa(d.Amount)))); err != nil {
			log.Fatal(err)
		}
	}
	return js, topo, end
}

// A consumer of two partitions on the embedded server, and the idempotency
// every handler needs: after a crash, what ran after the last acknowledged
// position is delivered again, in order; the ledger skips it by comparing
// the delivery's position with the last one it applied to the account.
// Here the crash is played by resetting the durable consumers to the start,
// as if no acknowledgement had reached the server.
func ExampleNewConsumer() {
	deposits := []deposit{{"alice", 10}, {"bob", 5}, {"alice", -3}, {"carol", 7}, {"bob", 1}, {"alice", 4}}
	js, topo, end := depositsServer(deposits)
	defer end()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l := &ledger{balance: map[string]int{}, applied: map[string]int64{}, progress: make(chan struct{})}
	l.run(js, topo, len(deposits))
	for p := range int32(2) { // the crash: the server forgets every acknowledgement
		if _, err := js.ResetConsumerToSequence(ctx, topo.Stream, "ledger-"+strconv.Itoa(int(p)), 1); err != nil {
			log.Fatal(err)
		}
	}
	l.run(js, topo, len(deposits)) // the restart: everything is delivered again
	fmt.Println("alice", l.balance["alice"], "bob", l.balance["bob"], "carol", l.balance["carol"])
	fmt.Println("handled", l.handled, "skipped as replays", l.skipped)
	// Output:
	// alice 11 bob 6 carol 7
	// handled 12 skipped as replays 6
}

// A producer publishes an exchange on the subject of its aggregate's
// partition, the aggregate id in a header.
func ExampleTopology() {
	topo := jetstream.Topology{Stream: "ORDERS", Prefix: "orders", Partitions: 8}
	cfg, _ := topo.StreamConfig()
	fmt.Println(cfg.Name, cfg.Subjects[0], cfg.Subjects[7], len(cfg.Subjects))
	m := topo.NewMsg("order-42", []byte(`{"placed":true}`))
	fmt.Println(m.Subject, m.Header.Get(jetstream.KeyHeader), topo.PartitionOf("order-42"))
	// Output:
	// ORDERS orders.0 orders.7 8
	// orders.5 order-42 5
}

// Connect names the server that did not answer.
func ExampleConnect() {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	url := "nats://" + l.Addr().String()
	l.Close() // nobody listens there any more
	_, _, err := jetstream.Connect(url, nats.Timeout(time.Second))
	fmt.Println(errors.Is(err, jetstream.ErrUnreachable))
	// Output:
	// true
}

// Revoke hands a partition over while the consumer runs: once it returns,
// the partition's settled prefix is acknowledged and confirmed, so the next
// owner starts right after it.
func ExampleConsumer_Revoke() {
	js, topo, end := depositsServer([]deposit{{"alice", 1}, {"bob", 2}, {"alice", 3}}) // alice is in partition 0, bob in 1
	defer end()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sched, _ := schedulers.NewParallel("accounts", 2)
	defer sched.Dispose()
	accounts := aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}
	handled := make(chan struct{}, 3)
	c, err := jetstream.NewConsumer("ledger", jetstream.Subscription{JetStream: js, Topology: topo, Owned: []int32{0, 1}},
		accounts, sched, depositCodec,
		func(context.Context, partition.Delivery[deposit]) error { handled <- struct{}{}; return nil })
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Prepare(ctx); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		<-handled
	}
	settled, err := c.Revoke(ctx, topo.PartitionOf("alice"))
	if err != nil {
		log.Fatal(err)
	}
	info, _ := js.Consumer(ctx, topo.Stream, "ledger-"+strconv.Itoa(int(settled.Partition)))
	fmt.Println("partition", settled.Partition, "prefix", settled.Prefix, "ack floor", info.CachedInfo().AckFloor.Stream)
	fmt.Println("still owned", c.Owned())
	if err := c.StopGracefully(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// partition 0 prefix 3 ack floor 3
	// still owned [1]
}
