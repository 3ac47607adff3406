package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
)

// edgeDo is what one exchange of the batch property does.
type edgeDo int

const (
	edgeOK         edgeDo = iota // the handler returns nil
	edgeErr                      // the handler returns an error
	edgePanic                    // the handler panics
	edgeGoexit                   // the handler calls runtime.Goexit
	edgeCtxNil                   // WithContextOf returns nil
	edgeCtxPanic                 // WithContextOf panics
	edgeHookGoexit               // the handler returns nil, the outcome hook calls runtime.Goexit
	edgeDoCount
)

type edgeX struct {
	id  aggregate.ID
	seq int
	do  edgeDo
}

func (x edgeX) AggregateID() aggregate.ID { return x.id }

// Every exchange of a lane's batch is accounted for once whatever its
// neighbours do (return, fail, panic, Goexit in the handler or the hook, a
// failing WithContextOf): the outcome hook once per exchange with the
// expected outcome, the handlers of one id called in order, the ones after
// a panic too, and the Stats exact at the end.
func TestBatchAccountsEveryExchangeOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ids := rapid.IntRange(1, 4).Draw(rt, "ids")
		groups := rapid.IntRange(1, 3).Draw(rt, "groups")
		goroutines := rapid.IntRange(1, 2).Draw(rt, "goroutines")
		dos := rapid.SliceOfN(rapid.IntRange(0, int(edgeDoCount)-1), 1, 150).Draw(rt, "dos")
		var failure string
		synctest.Test(t, func(t *testing.T) {
			failure = edgeBatchRun(t, ids, groups, goroutines, dos)
		})
		if failure != "" {
			rt.Fatal(failure)
		}
	})
}

func edgeBatchRun(t *testing.T, ids, groups, goroutines int, dos []int) string {
	s, err := schedulers.NewParallel("edge", goroutines, schedulers.WithLogger(discardLogger))
	if err != nil {
		return err.Error()
	}
	defer s.Dispose()
	var mu sync.Mutex
	handled := map[string][]int{}
	hooked := map[[2]int]int{} // (id, seq) -> calls
	outcome := map[[2]int]dispatch.Outcome{}
	idx := func(x edgeX) [2]int { return [2]int{int(x.id.ID[0] - 'a'), x.seq} }
	injected := errors.New("injected")
	d, err := dispatch.New[edgeX]("orders", orders, nil,
		func(ctx context.Context, x edgeX) error {
			mu.Lock()
			handled[x.id.ID] = append(handled[x.id.ID], x.seq)
			mu.Unlock()
			switch x.do {
			case edgeErr:
				return injected
			case edgePanic:
				panic(injected)
			case edgeGoexit:
				runtime.Goexit()
			}
			return nil
		},
		quietOf[edgeX](), dispatch.WithScheduler(s), dispatch.WithParallelism(groups),
		dispatch.WithContextOf(func(ctx context.Context, x edgeX) context.Context {
			switch x.do {
			case edgeCtxNil:
				return nil
			case edgeCtxPanic:
				panic(injected)
			}
			return ctx
		}),
		dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[edgeX]) {
			mu.Lock()
			hooked[idx(r.Exchange)]++
			outcome[idx(r.Exchange)] = r.Outcome
			mu.Unlock()
			if r.Exchange.do == edgeHookGoexit {
				runtime.Goexit()
			}
		}))
	if err != nil {
		return err.Error()
	}
	if err := d.Prepare(t.Context()); err != nil {
		return err.Error()
	}
	if err := d.Start(); err != nil {
		return err.Error()
	}
	seqs := make([]int, ids)
	var want dispatch.Stats
	wantHandled := map[string][]int{}
	wantOutcome := map[[2]int]dispatch.Outcome{}
	for i, do := range dos {
		id := i % ids
		x := edgeX{id: aggregate.NewID(orders, string(rune('a'+id))), seq: seqs[id], do: edgeDo(do)}
		seqs[id]++
		if err := d.Emit(t.Context(), x); err != nil {
			return err.Error()
		}
		want.Received++
		o := dispatch.OutcomePanic
		switch x.do {
		case edgeOK, edgeHookGoexit:
			o = dispatch.OutcomeSuccess
			want.Succeeded++
		case edgeErr:
			o = dispatch.OutcomeError
			want.Failed++
		default:
			want.Failed++
		}
		if x.do != edgeCtxNil && x.do != edgeCtxPanic {
			wantHandled[x.id.ID] = append(wantHandled[x.id.ID], x.seq)
		}
		wantOutcome[idx(x)] = o
	}
	st, err := edgeStop(t, d)
	if err != nil {
		<-d.Done()
		return fmt.Sprintf("stop: %v (stats %+v)", err, st)
	}
	if st != want {
		return fmt.Sprintf("stats %+v, want %+v", st, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, w := range wantHandled {
		if fmt.Sprint(handled[id]) != fmt.Sprint(w) {
			return fmt.Sprintf("id %s handled %v, want %v", id, handled[id], w)
		}
	}
	for k, o := range wantOutcome {
		if hooked[k] != 1 || outcome[k] != o {
			return fmt.Sprintf("exchange %v: hook called %d times, outcome %v, want once with %v", k, hooked[k], outcome[k], o)
		}
	}
	return ""
}
