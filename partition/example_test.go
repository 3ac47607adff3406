package partition_test

import (
	"errors"
	"fmt"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/partition"
)

// Positions finish out of order; the prefix, what may be acknowledged, moves
// only when everything below it has finished. A discarded position stops it
// until the broker delivers again from the prefix + 1.
func ExampleTracker() {
	var t partition.Tracker
	for _, pos := range []int64{10, 11, 13, 14, 16} { // 12 and 15 are gaps
		if err := t.Track(pos); err != nil {
			fmt.Println(err)
		}
	}
	show := func(step string) {
		pos, ok := t.Prefix()
		fmt.Printf("%-14s prefix %d (%v), pending %d\n", step, pos, ok, t.Pending())
	}
	_ = t.Finish(13)
	show("finish 13")
	_ = t.Finish(10)
	show("finish 10")
	_ = t.Finish(11)
	show("finish 11")
	_ = t.Discard(14) // a forced stop dropped it
	_ = t.Finish(16)
	show("discard 14")
	blocked, _ := t.Blocked()
	fmt.Println("blocked at", blocked)

	t.Reset(14) // the broker delivers again from 14
	_ = t.Track(14)
	_ = t.Finish(14)
	show("redelivered 14")

	err := t.Finish(14)
	fmt.Println(errors.Is(err, partition.ErrEnded), err)
	// Output:
	// finish 13      prefix 0 (false), pending 4
	// finish 10      prefix 10 (true), pending 3
	// finish 11      prefix 13 (true), pending 2
	// discard 14     prefix 13 (true), pending 0
	// blocked at 14
	// redelivered 14 prefix 14 (true), pending 0
	// true partition: end 14: at or below the finished prefix 14: partition: position already ended
}

// A consumer holds one tracker per assigned partition and commits the
// prefixes of all of them at once.
func ExampleSet() {
	var s partition.Set
	for p := range int32(3) {
		t := s.Tracker(p) // on assignment: once per partition
		for pos := range int64(5) {
			_ = t.Track(pos)
		}
		for pos := range int64(p + 2) {
			_ = t.Finish(pos)
		}
	}
	for _, pr := range s.Prefixes() {
		fmt.Printf("partition %d: commit offset %d\n", pr.Partition, pr.Position+1)
	}
	revoked, _ := s.Remove(1) // on revocation
	pos, _ := revoked.Prefix()
	fmt.Println("last commit of partition 1:", pos+1, "partitions left:", s.Len())
	// Output:
	// partition 0: commit offset 2
	// partition 1: commit offset 3
	// partition 2: commit offset 4
	// last commit of partition 1: 3 partitions left: 2
}

// The ids a broker put in partition 3 of 8 (by aggregate.GroupKey) fall in 8
// of 64 groups under the same hash, and in all 64 under GroupKey.
func ExampleGroupKey() {
	fmt.Println(partition.GroupKey("order-1", 64), partition.GroupKey("order-2", 64))
	same, independent := map[int]bool{}, map[int]bool{}
	for i := range 10000 {
		id := fmt.Sprintf("order-%d", i)
		if aggregate.GroupKey(id, 8) == 3 {
			same[aggregate.GroupKey(id, 64)] = true
			independent[partition.GroupKey(id, 64)] = true
		}
	}
	fmt.Println("groups used:", len(same), "by the partition's hash,", len(independent), "by GroupKey")
	// Output:
	// 37 43
	// groups used: 8 by the partition's hash, 64 by GroupKey
}

// A redelivered record may have run before, in full or in part.
func ExampleDelivery() {
	d := partition.Delivery[string]{Exchange: "order-1 placed", Partition: 3, Position: 1042, Attempt: 2}
	fmt.Println(d.Partition, d.Position, d.Redelivered())
	// Output:
	// 3 1042 true
}
