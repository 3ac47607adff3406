package bench

import (
	"runtime"
	"sync"
	"testing"
)

// TestRingOrderAcrossWrapAndParking pushes through a 4-slot ring so that it
// wraps and fills constantly, and pauses until the consumer has parked
// before some pushes, so that the park and wake-up path runs too.
func TestRingOrderAcrossWrapAndParking(t *testing.T) {
	const n = 20000
	c := Cell{K: 1, P: 1, Handler: Noop}
	r := NewRun(c, NewWorkload(1, n), n, RunOptions{Verify: true})
	q := newRing(4)
	var handled int64
	var wg sync.WaitGroup
	wg.Go(func() { handled = q.consume(r) })
	parkedPushes := 0
	err := r.Produce(func(x Exchange) bool {
		if x.Num%1000 == 999 {
			for q.sleeping.Load() == 0 {
				runtime.Gosched()
			}
			parkedPushes++
		}
		q.push(x)
		return true
	})
	for q.sleeping.Load() == 0 {
		runtime.Gosched() // close a parked consumer too
	}
	q.close()
	wg.Wait()
	if err == nil {
		err = r.Verify(handled)
	}
	if err != nil {
		t.Fatal(err)
	}
	if parkedPushes != n/1000 {
		t.Fatalf("%d pushes to a parked consumer, want %d", parkedPushes, n/1000)
	}
}

func TestRingSizeMustBePowerOfTwo(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("newRing(3) did not panic")
		}
	}()
	newRing(3)
}
