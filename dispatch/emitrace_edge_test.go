package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/testkit"
)

// edgeEmitRun hammers Emit from several goroutines and stops the dispatcher
// at a random moment; it checks that Emit returned nil exactly for the
// exchanges counted, the ledger, and it polls Stats once Done closed.
func edgeEmitRun(t *testing.T, seed uint64) (afterDone dispatch.Stats, bad bool) {
	r := rand.New(rand.NewPCG(seed, 3))
	producers, ids, budget := 2+r.IntN(6), 1+r.IntN(20), 1+r.IntN(8)
	stop := r.IntN(3)
	led := newBrkLedger()
	d, err := dispatch.New[testkit.Exchange]("edge", orders, nil, func(ctx context.Context, x testkit.Exchange) error {
		led.handle(x)
		return nil
	}, quiet, dispatch.WithParallelism(1+r.IntN(8)), dispatch.WithMaxPending(budget),
		dispatch.WithDiscardHook(led.discard), dispatch.WithScheduler(newParallel(t, 1+r.IntN(3))))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	// one id per producer, so that per-id order is the producer's order
	for p := range producers {
		wg.Go(func() {
			id := aggregate.NewID(orders, fmt.Sprintf("p%d-%d", p, p%ids))
			for seq := 0; ; seq++ {
				err := d.Emit(context.Background(), testkit.Exchange{ID: id, Seq: seq})
				if err != nil {
					if !errors.Is(err, dispatch.ErrStopped) {
						t.Errorf("Emit: %v", err)
					}
					return
				}
				accepted.Add(1)
			}
		})
	}
	for range r.IntN(2000) { // a random point of the stream for the stop
		runtime.Gosched()
	}
	switch stop {
	case 0:
		d.Quiesce()
	case 1:
		d.ForceStop()
	case 2:
		go d.ForceStop()
		_ = d.StopGracefully(context.Background())
	}
	<-d.Done()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		if s := d.Stats(); s.InFlight != 0 || s.Received != s.Succeeded+s.Failed+s.Discarded {
			afterDone, bad = s, true
		}
		select {
		case <-done:
			s := d.Stats()
			if s.Received != accepted.Load() {
				t.Errorf("seed %d: %d Emit calls returned nil, Received %d", seed, accepted.Load(), s.Received)
			}
			if err := led.check(s, nil); err != nil {
				t.Errorf("seed %d: %v", seed, err)
			}
			return afterDone, bad
		default:
		}
	}
}

// An Emit racing a stop never shows in Stats after Done: it is counted in
// Received only once it is past the gate (InFlight is 0 after Done, and
// Received never goes down).
func TestEmitRacingStopNoInFlightAfterDone(t *testing.T) {
	base := uint64(time.Now().UnixNano())
	seen := 0
	var example dispatch.Stats
	for i := range uint64(300) {
		if s, bad := edgeEmitRun(t, base+i); bad {
			seen++
			example = s
		}
		if t.Failed() {
			return
		}
	}
	if seen > 0 {
		t.Errorf("%d of 300 runs showed InFlight != 0 after Done, e.g. %+v", seen, example)
	}
}
