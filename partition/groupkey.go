package partition

import "fmt"

// 64-bit FNV-1a parameters.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// GroupKey returns the group of aggregate id among groups groups inside one
// partition: a 64-bit FNV-1a hash of id's bytes, finalised so that every bit
// of the result depends on every byte, modulo groups. It is always in
// [0, groups), the same for the same id in every process and version, and
// does not allocate (about 1 ns per byte).
//
// It is independent of the hash a broker partitions by (aggregate.GroupKey's
// HashCode, Kafka's murmur2): the ids of one of P partitions all share hash
// mod P, so aggregate.GroupKey(id, groups) would put them in only groups/P of
// the groups when P divides groups; GroupKey spreads them over all of them.
//
// It panics, with a message starting "partition:", when groups < 1: a
// programming error like a division by zero, as for aggregate.GroupKey; a
// constructor that takes a group count rules it out by returning an error.
func GroupKey(id string, groups int) int {
	if groups < 1 {
		panic(fmt.Sprintf("partition: group count must be at least 1, got %d", groups))
	}
	h := uint64(fnvOffset)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= fnvPrime
	}
	return int(mix(h) % uint64(groups))
}

// mix is the 64-bit finaliser of MurmurHash3: FNV-1a's low bits depend only on
// the low bits of the bytes, as String.hashCode's do, so a hash mod a power of
// two would be correlated with the broker's partition without it.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
