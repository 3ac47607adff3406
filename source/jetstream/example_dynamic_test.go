package jetstream_test

import (
	"context"
	"fmt"
	"log"
	"sort"
	"sync"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/source/jetstream"
)

// With a dynamic assignment, members claim the partitions through leases
// in a KV bucket instead of being told which they own; a lone member claims
// them all. LeaseOf gives each handler the lease it runs under: the member
// and the epoch, which a store compares to refuse the writes of an owner
// whose lease passed.
func ExampleWithDynamicAssignment() {
	deposits := []deposit{{"alice", 10}, {"bob", 5}, {"alice", -3}, {"bob", 1}}
	js, topo, end := depositsServer(deposits)
	defer end()
	sched, err := schedulers.NewParallel("accounts", 2)
	if err != nil {
		log.Fatal(err)
	}
	defer sched.Dispose()
	accounts := aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}
	var mu sync.Mutex
	epochs := map[int32]uint64{} // the epoch each partition was handled under
	members := map[string]int{}
	handled := make(chan struct{}, len(deposits))
	c, err := jetstream.NewConsumer("ledger", jetstream.Subscription{JetStream: js, Topology: topo},
		accounts, sched, depositCodec,
		func(ctx context.Context, d partition.Delivery[deposit]) error {
			lease, ok := jetstream.LeaseOf(ctx)
			if !ok || !lease.Valid() {
				return fmt.Errorf("no valid lease for partition %d", d.Partition)
			}
			mu.Lock()
			epochs[lease.Partition] = lease.Epoch
			members[lease.Member]++
			mu.Unlock()
			handled <- struct{}{}
			return nil
		},
		jetstream.WithDynamicAssignment("member-a", 2*time.Second))
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
	for range deposits {
		<-handled
	}
	owned := c.Owned()
	sort.Slice(owned, func(i, j int) bool { return owned[i] < owned[j] })
	if err := r.StopGracefully(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("member-a owned", owned, "and handled", members["member-a"])
	fmt.Println("partitions handled under an epoch:", len(epochs), epochs[0] > 0 && epochs[1] > 0)
	// Output:
	// member-a owned [0 1] and handled 4
	// partitions handled under an epoch: 2 true
}
