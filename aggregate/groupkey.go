package aggregate

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unicode/utf16"
)

// DefaultParallelism is the default number of groups of a dispatcher: 64 x
// runtime.GOMAXPROCS(0) at start-up (128 on 2 CPUs), or the environment
// variable AGGFLOW_PARALLELISM when it holds a positive integer (anything else
// is ignored). It is not the number of goroutines: see the package doc.
var DefaultParallelism = defaultParallelism()

func defaultParallelism() int {
	if n, err := strconv.Atoi(os.Getenv("AGGFLOW_PARALLELISM")); err == nil && n > 0 {
		return n
	}
	return 64 * runtime.GOMAXPROCS(0)
}

// HashCode returns Java's String.hashCode of id: h = 31*h + c over the UTF-16
// code units c of id, wrapping around in int32, 0 for "". Invalid UTF-8 bytes
// count as U+FFFD, as utf16.Encode([]rune(id)) would have them. It does not
// allocate. Group numbers therefore match those a JVM service computes from
// the same id, which matters where they are persisted.
func HashCode(id string) int32 {
	// ASCII is one code unit per byte: four at a time, as h*31^4 plus the
	// four terms, which breaks the chain of dependent multiplications.
	var h uint32
	i := 0
	for ; i+4 <= len(id); i += 4 {
		b0, b1, b2, b3 := uint32(id[i]), uint32(id[i+1]), uint32(id[i+2]), uint32(id[i+3])
		if (b0|b1|b2|b3)&0x80 != 0 {
			break
		}
		h = h*(31*31*31*31) + b0*(31*31*31) + b1*(31*31) + b2*31 + b3
	}
	for ; i < len(id) && id[i] < 0x80; i++ {
		h = 31*h + uint32(id[i])
	}
	// The rest starts at a non-ASCII byte: a rune boundary, or an invalid
	// byte that ranging over the whole id would also have seen alone.
	for _, r := range id[i:] {
		if r > 0xFFFF {
			// A supplementary rune is two code units: a surrogate pair.
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + uint32(hi)
			r = lo
		}
		h = 31*h + uint32(r)
	}
	return int32(h)
}

// GroupKey returns HashCode(id) floor-modulo n: always in [0, n), the same for
// the same id. It panics, with a message starting "aggregate:", when n < 1: a
// programming error like a division by zero, which every constructor that takes
// a group count rules out by returning an error first.
func GroupKey(id string, n int) int {
	return floorMod(HashCode(id), n)
}

// floorMod is h floor-modulo n, panicking as GroupKey says when n < 1.
func floorMod(h int32, n int) int {
	if n < 1 {
		panic(fmt.Sprintf("aggregate: group count must be at least 1, got %d", n))
	}
	k := int(h) % n
	if k < 0 {
		k += n
	}
	return k
}
