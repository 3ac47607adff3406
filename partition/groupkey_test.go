package partition_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/partition"
	"github.com/stretchr/testify/require"
)

// murmur2 is Kafka's murmur2 (Utils.murmur2, seed 0x9747b28c), the hash its
// default partitioner takes a record key's partition from.
func murmur2(data []byte) int32 {
	const m, r = 0x5bd1e995, 24
	h := uint32(0x9747b28c) ^ uint32(len(data))
	n := len(data) &^ 3
	for i := 0; i < n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= m
		k ^= k >> r
		k *= m
		h = h*m ^ k
	}
	switch tail := data[n:]; len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// kafkaPartition is the default partitioner's choice for a keyed record.
func kafkaPartition(id string, partitions int) int {
	return int(murmur2([]byte(id))&0x7fffffff) % partitions
}

func TestMurmur2MatchesKafka(t *testing.T) {
	// Values of org.apache.kafka.common.utils.Utils.murmur2 on the UTF-8 bytes.
	for id, want := range map[string]int32{
		"1": -1993445489, "12": 126087238, "123": -267702483, "1234": -1614185708, "12345": -1188365604,
	} {
		require.Equal(t, want, murmur2([]byte(id)), id)
	}
}

// usedGroups returns how many ids each of groups groups receives.
func usedGroups(ids []string, groups int, key func(string, int) int) []int {
	counts := make([]int, groups)
	for _, id := range ids {
		counts[key(id, groups)]++
	}
	return counts
}

func nonZero(counts []int) int {
	n := 0
	for _, c := range counts {
		if c > 0 {
			n++
		}
	}
	return n
}

// chiSquare measures how far counts are from uniform: about len(counts)-1
// for a uniform spread; above 2x that, p < 1e-5 for 64 groups.
func chiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	want := float64(total) / float64(len(counts))
	x := 0.0
	for _, c := range counts {
		d := float64(c) - want
		x += d * d / want
	}
	return x
}

// The ids of one of 8 partitions all share hash mod 8: grouped again by the
// same hash mod 64 they fill only 64/8 groups, while partition.GroupKey spreads
// them over all 64, evenly, whichever hash the broker partitioned by.
func TestGroupKeyIsIndependentOfThePartitionKey(t *testing.T) {
	const partitions, groups = 8, 64
	ids := make([]string, 80000)
	for i := range ids {
		ids[i] = fmt.Sprintf("order-%d", i)
	}
	partitioners := map[string]func(string, int) int{
		"aggregate.GroupKey (String.hashCode)": aggregate.GroupKey,
		"Kafka murmur2":                        kafkaPartition,
	}
	for name, partitionOf := range partitioners {
		worst := 0.0
		for p := range partitions {
			var mine []string
			for _, id := range ids {
				if partitionOf(id, partitions) == p {
					mine = append(mine, id)
				}
			}
			counts := usedGroups(mine, groups, partition.GroupKey)
			require.Equal(t, groups, nonZero(counts), "%s, partition %d: every group is used", name, p)
			chi := chiSquare(counts)
			require.Less(t, chi, 2.0*(groups-1), "%s, partition %d: evenly (%v)", name, p, counts)
			worst = max(worst, chi)
			if name == "aggregate.GroupKey (String.hashCode)" {
				same := usedGroups(mine, groups, aggregate.GroupKey)
				require.Equal(t, groups/partitions, nonZero(same), "partition %d: the partition's own hash leaves most groups idle", p)
			}
		}
		t.Logf("%s: worst chi-square over %d partitions %.1f (uniform: about %d)", name, partitions, worst, groups-1)
	}
}

func TestGroupKeyPanicsBelowOneGroup(t *testing.T) {
	for _, g := range []int{0, -1} {
		require.PanicsWithValue(t, fmt.Sprintf("partition: group count must be at least 1, got %d", g),
			func() { partition.GroupKey("order-1", g) })
	}
}

func TestGroupKeyDoesNotAllocate(t *testing.T) {
	id := "order-1"
	require.Zero(t, testing.AllocsPerRun(100, func() { partition.GroupKey(id, 128) }))
}

func FuzzGroupKey(f *testing.F) {
	f.Add("order-1", 64)
	f.Add("", 1)
	f.Add("订单-1\xff", 1<<62)
	f.Add("😀", -3)
	f.Fuzz(func(t *testing.T, id string, groups int) {
		if groups < 1 {
			require.Panics(t, func() { partition.GroupKey(id, groups) })
			return
		}
		k := partition.GroupKey(id, groups)
		require.GreaterOrEqual(t, k, 0)
		require.Less(t, k, groups)
		require.Equal(t, k, partition.GroupKey(id, groups), "the same id, the same group")
		if groups%2 == 0 {
			require.Equal(t, k%(groups/2), partition.GroupKey(id, groups/2), "one hash, mod a divisor")
		}
	})
}
