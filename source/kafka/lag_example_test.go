package kafka_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/kafka"
)

// A member that waits until it has handled what the topic held: CaughtUp
// reads the end offsets once and returns when every partition it owns has
// finished the records below them; Lag says how far behind each is.
func ExampleConsumer_CaughtUp() {
	c := depositCluster(2)
	defer c.Close()
	sched, err := schedulers.NewParallel("deposits", 4)
	if err != nil {
		panic(err)
	}
	defer sched.Dispose()
	l := newLedger(9)
	k, err := kafka.NewConsumer("deposits", kafka.Subscription{Brokers: c.Addrs(), Group: "ledger", Topic: "deposits"},
		accounts, sched, deposits, l.apply, kafka.WithLogger(quiet))
	if err != nil {
		panic(err)
	}
	if err := k.Prepare(context.Background()); err != nil {
		panic(err)
	}
	if err := k.Start(); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.CaughtUp(ctx); err != nil {
		panic(err) // names the partitions behind: "kafka: consumer "deposits": not caught up: partition 1: 3 behind ..."
	}
	l.print()
	fmt.Println("lag:", k.Lag())
	if err := k.StopGracefully(ctx); err != nil {
		panic(err)
	}
	// Output:
	// alice [10 20 30]
	// bob [10 20 30]
	// carol [10 20 30]
	// lag: map[0:0 1:0]
}
