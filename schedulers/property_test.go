package schedulers_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aggflow/aggflow/schedulers"
	"pgregory.net/rapid"
)

// discardKey marks the context with which the discard hook below calls a
// dropped task, so that the task records "discarded" instead of "ran".
type discardKey struct{}

// tracked is one task of the property test and what became of it.
type tracked struct {
	accepted       bool
	ran, discarded atomic.Int32
}

// serial is what the tasks of one worker record: their ids in run order, and
// how often two of them ran at once.
type serial struct {
	order            []int // appended only by tasks of the worker, which never overlap
	active, overlaps atomic.Int32
}

// How a task of the property test ends, once it has recorded its run.
const (
	plain  = iota
	yields // runtime.Gosched, to vary interleavings
	panics
	exits // runtime.Goexit
	endings
)

// task returns the Task for tr: it records a run (with its id in w, if not
// nil) and ends as told, or, called by the discard hook, records a discard.
func (tr *tracked) task(id int, w *serial, ending int) schedulers.Task {
	return func(ctx context.Context) {
		if ctx.Value(discardKey{}) != nil {
			tr.discarded.Add(1)
			return
		}
		tr.ran.Add(1)
		if w != nil {
			if w.active.Add(1) != 1 {
				w.overlaps.Add(1)
			}
			defer w.active.Add(-1)
			w.order = append(w.order, id)
		}
		switch ending {
		case yields:
			runtime.Gosched()
		case panics:
			panic(id)
		case exits:
			runtime.Goexit()
		}
	}
}

type stopKind int

const (
	graceful stopKind = iota
	force
	gracefulThenForce
)

// Random workers and direct submitters (with tasks that panic or call
// runtime.Goexit) race with a stop of a random kind at a
// random point (and a Worker.Dispose at another): every accepted task ends
// exactly once, ran or discarded; nothing is discarded after a graceful stop
// alone; every worker ran its tasks in submission order, one at a time, and
// none after one of its tasks was discarded; Done closes.
func TestPropertyEveryTaskEndsOnce(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { rapid.Check(t, everyTaskEndsOnce(k)) })
	}
}

// ttls are the idle TTLs drawn for an elastic scheduler: short enough for
// goroutines to retire, and be replaced, while the tasks race a stop.
var ttls = []time.Duration{time.Microsecond, 50 * time.Microsecond, time.Millisecond, schedulers.DefaultTTL}

func everyTaskEndsOnce(k kind) func(*rapid.T) {
	discardCtx := context.WithValue(context.Background(), discardKey{}, true)
	return func(rt *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(rt, "parallelism")
		workers := rapid.IntRange(1, 4).Draw(rt, "workers")
		lanes := make([][]int, workers+1) // per submitter, how its tasks end; the last is direct
		total := 0
		for i := range lanes {
			lanes[i] = rapid.SliceOfN(rapid.IntRange(0, endings-1), 0, 60).Draw(rt, "lane")
			total += len(lanes[i])
		}
		kind := stopKind(rapid.IntRange(0, 2).Draw(rt, "stop kind"))
		stopAt := rapid.IntRange(0, total).Draw(rt, "stop at")
		disposeWorker := rapid.IntRange(-1, workers-1).Draw(rt, "disposed worker")
		disposeAt := rapid.IntRange(0, total).Draw(rt, "worker dispose at")

		opts := []schedulers.Option{
			schedulers.WithDiscardHook(func(task schedulers.Task) { task(discardCtx) }),
			schedulers.WithPanicHook(func(*schedulers.PanicError) {}),
		}
		if k.name == "elastic" {
			opts = append(opts, schedulers.WithTTL(rapid.SampledFrom(ttls).Draw(rt, "ttl")))
		}
		s, err := k.build("prop", n, opts...)
		if err != nil {
			rt.Fatal(err)
		}
		ws := make([]schedulers.Worker, workers)
		for i := range ws {
			if ws[i], err = s.NewWorker(); err != nil {
				rt.Fatal(err)
			}
		}
		gracefulErr := make(chan error, 1)
		stop := func() {
			if kind != force {
				go func() { gracefulErr <- s.DisposeGracefully(context.Background()) }()
			}
			if kind != graceful {
				s.Dispose()
			}
		}
		var submitted atomic.Int32
		afterSubmit := func() {
			switch int(submitted.Add(1)) {
			case stopAt:
				stop()
			case disposeAt:
				if disposeWorker >= 0 {
					ws[disposeWorker].Dispose()
				}
			}
		}
		if stopAt == 0 {
			stop()
		}

		tasks := make([][]*tracked, len(lanes))
		serials := make([]serial, workers)
		var wg sync.WaitGroup
		for lane, endings := range lanes {
			tasks[lane] = make([]*tracked, len(endings))
			for i := range tasks[lane] {
				tasks[lane][i] = &tracked{}
			}
			wg.Go(func() {
				for i, ending := range endings {
					tr := tasks[lane][i]
					if lane == workers {
						tr.accepted = s.Schedule(tr.task(i, nil, ending)) == nil
					} else {
						tr.accepted = ws[lane].Schedule(tr.task(i, &serials[lane], ending)) == nil
					}
					afterSubmit()
				}
			})
		}
		wg.Wait()
		<-s.Done()
		if kind != force {
			if err := <-gracefulErr; err != nil {
				rt.Fatalf("graceful stop: %v", err)
			}
		}

		for lane := range lanes {
			var ran []int
			discardedSeen := false
			for i, tr := range tasks[lane] {
				r, d := tr.ran.Load(), tr.discarded.Load()
				switch {
				case !tr.accepted && r+d != 0:
					rt.Fatalf("lane %d task %d: rejected but ran %d, discarded %d", lane, i, r, d)
				case tr.accepted && r+d != 1:
					rt.Fatalf("lane %d task %d: ran %d, discarded %d", lane, i, r, d)
				case d == 1 && kind == graceful && lane != disposeWorker:
					rt.Fatalf("lane %d task %d: discarded by a graceful stop", lane, i)
				}
				if lane == workers {
					continue
				}
				if r == 1 {
					if discardedSeen {
						rt.Fatalf("worker %d: task %d ran after an earlier task was discarded", lane, i)
					}
					ran = append(ran, i)
				}
				discardedSeen = discardedSeen || d == 1
			}
			if lane == workers {
				continue
			}
			w := &serials[lane]
			if o := w.overlaps.Load(); o != 0 {
				rt.Fatalf("worker %d: %d overlapping runs", lane, o)
			}
			if !slices.Equal(ran, w.order) {
				rt.Fatalf("worker %d: run order %v, want %v", lane, w.order, ran)
			}
		}
	}
}
