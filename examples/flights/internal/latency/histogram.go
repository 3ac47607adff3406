// Package latency records durations into a fixed log-scale histogram cheap
// enough to sit on a dispatcher's hot path: Record is two bit operations and
// one atomic add, needs no lock and never allocates, whatever the number of
// samples.
package latency

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits sets the resolution: each power of two is split into 2^subBits
// buckets, so a bucket's width is at most 1/8 of its lower edge.
const subBits = 3

// exact is the number of small values (0 ns to exact-1 ns) with a bucket of
// their own.
const exact = 2 << subBits

// numBuckets covers every non-negative int64 nanosecond count.
const numBuckets = exact + (63-subBits-1)<<subBits

// Histogram counts durations in log-scale buckets. The zero value is empty and
// ready; all methods are safe for concurrent use. Quantile over-reports by at
// most 12.5% (the width of a bucket), never under-reports.
type Histogram struct {
	counts [numBuckets]atomic.Int64
}

// Record adds one duration; a negative one counts as 0.
func (h *Histogram) Record(d time.Duration) {
	h.counts[bucket(uint64(max(d, 0)))].Add(1)
}

// Count returns the number of durations recorded.
func (h *Histogram) Count() int64 {
	var n int64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// Quantile returns the upper edge of the bucket holding the q-quantile
// (0 <= q <= 1) of the durations recorded: the smallest bucket edge that at
// least q of them do not exceed. It returns 0 when nothing was recorded.
// Durations recorded concurrently may or may not be seen.
func (h *Histogram) Quantile(q float64) time.Duration {
	var snapshot [numBuckets]int64
	var total int64
	for i := range h.counts {
		snapshot[i] = h.counts[i].Load()
		total += snapshot[i]
	}
	if total == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(total))), 1)
	var seen int64
	for i, n := range snapshot {
		if seen += n; seen >= rank {
			return time.Duration(upper(i))
		}
	}
	return time.Duration(upper(numBuckets - 1))
}

// bucket maps v to its bucket: v itself below exact, else the power of two
// (the exponent) and the subBits bits that follow the leading one.
func bucket(v uint64) int {
	if v < exact {
		return int(v)
	}
	e := bits.Len64(v) - 1
	return (e-subBits)<<subBits + int(v>>(e-subBits))
}

// upper is the largest value of bucket i.
func upper(i int) uint64 {
	if i < exact {
		return uint64(i)
	}
	e := i>>subBits + subBits - 1
	mantissa := uint64(i&(1<<subBits-1) + 1<<subBits)
	return (mantissa+1)<<(e-subBits) - 1
}
