package fastmod

import (
	"math"
	"math/rand/v2"
	"testing"
)

// floorMod is the reference: a division, then the sign fixed.
func floorMod(h int32, n int) int {
	k := int(h) % n
	if k < 0 {
		k += n
	}
	return k
}

func TestFloorModAtTheEdges(t *testing.T) {
	hs := []int32{0, 1, -1, 2, -2, 127, -128, 1 << 30, -(1 << 30), math.MaxInt32, math.MinInt32, math.MinInt32 + 1}
	ns := []int{1, 2, 3, 7, 64, 127, 128, 1000, 65536, 1<<31 - 1, 1 << 31, 1<<31 + 1, math.MaxUint32, 1 << 32, 1<<32 + 5, math.MaxInt64}
	for _, n := range ns {
		d := New(n)
		for _, h := range hs {
			if got, want := d.FloorMod(h), floorMod(h, n); got != want {
				t.Errorf("FloorMod(%d) mod %d = %d, want %d", h, n, got, want)
			}
		}
	}
}

func TestFloorModOfSmallCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 1024; n++ {
		d := New(n)
		for range 256 {
			h := int32(r.Uint32())
			if got, want := d.FloorMod(h), floorMod(h, n); got != want {
				t.Fatalf("FloorMod(%d) mod %d = %d, want %d", h, n, got, want)
			}
		}
	}
}

func TestNewRefusesACountBelowOne(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", n)
				}
			}()
			New(n)
		}()
	}
}

func FuzzFloorMod(f *testing.F) {
	f.Add(int32(0), uint32(1))
	f.Add(int32(-1), uint32(128))
	f.Add(int32(math.MinInt32), uint32(3))
	f.Add(int32(math.MaxInt32), uint32(math.MaxUint32))
	f.Fuzz(func(t *testing.T, h int32, n uint32) {
		if n == 0 {
			return
		}
		if got, want := New(int(n)).FloorMod(h), floorMod(h, int(n)); got != want {
			t.Fatalf("FloorMod(%d) mod %d = %d, want %d", h, n, got, want)
		}
	})
}

var (
	sink        int
	benchGroups = 128 // a variable: a constant count would let the compiler divide by multiplying too
)

// BenchmarkFloorMod: the remainder of hashes that vary in sign, by
// multiplication (FloorMod) and by division (the reference), ns per hash.
func BenchmarkFloorMod(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	hs := make([]int32, 1024)
	for i := range hs {
		hs[i] = int32(r.Uint32())
	}
	n := benchGroups
	b.Run("multiply", func(b *testing.B) {
		d := New(n)
		for i := 0; b.Loop(); i++ {
			sink += d.FloorMod(hs[i&1023])
		}
	})
	b.Run("divide", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			sink += floorMod(hs[i&1023], n)
		}
	})
}
