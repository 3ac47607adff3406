// Package fastmod takes an aggregate id's hash floor-modulo a group count
// fixed in advance with two multiplications instead of a division (the
// remainder by direct computation): the route of every exchange takes one,
// and a 64-bit division costs 40 to 90 cycles on some x86 cores.
package fastmod

import (
	"math"
	"math/bits"
)

// Divisor is a group count prepared for FloorMod. The zero value is not
// usable: build one with New. It is a value: copy it freely.
type Divisor struct {
	n    uint64 // the group count
	m    uint64 // ceil(2^64 / n) (0 for n = 1): the remainder's multiplier
	wrap uint64 // 2^32 mod n: what reading a negative hash as a uint32 adds
	big  bool   // n >= 2^32: the multiplier is exact only below, so divide
}

// New prepares n, at least 1 (it panics otherwise, as a division by zero
// would). Counts of 2^32 and more are served by a division.
func New(n int) Divisor {
	if n < 1 {
		panic("fastmod: group count must be at least 1")
	}
	if uint64(n) > math.MaxUint32 {
		return Divisor{n: uint64(n), big: true}
	}
	d := uint64(n)
	return Divisor{n: d, m: math.MaxUint64/d + 1, wrap: (1 << 32) % d}
}

// FloorMod returns h floor-modulo the group count: in [0, n), what
// aggregate.GroupKey computes from the same hash. No branch depends on h.
func (d Divisor) FloorMod(h int32) int {
	if d.big {
		return int(int64(h) + int64(d.n)&(int64(h)>>63)) // |h| < n: h, or h + n when negative
	}
	u := uint64(uint32(h))
	r, _ := bits.Mul64(d.m*u, d.n) // u mod n
	// A negative h read as uint32 is h + 2^32: take 2^32 mod n back off,
	// and bring a negative difference back into [0, n).
	s := int64(r) - int64(d.wrap&uint64(int64(h)>>63))
	return int(s + int64(d.n)&(s>>63))
}
