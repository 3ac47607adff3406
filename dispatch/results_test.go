package dispatch_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reactivex/rxgo/v2"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// Every exchange's Result reaches the reader once, in its group's order,
// and the stream completes at the dispatcher's end: read as a Flux, as an
// rxgo Observable and as an iterator.
func TestResultsReadThreeWays(t *testing.T) {
	xs := mixed(600, 13, orders)
	xs[7].Do, xs[8].Do = testkit.Fail, testkit.Panic
	read := map[string]func(*dispatch.Results[testkit.Exchange]) ([]dispatch.Result[testkit.Exchange], error){
		"flux": func(r *dispatch.Results[testkit.Exchange]) ([]dispatch.Result[testkit.Exchange], error) {
			return flux.Collect(t.Context(), r.Flux())
		},
		"rxgo": func(r *dispatch.Results[testkit.Exchange]) (got []dispatch.Result[testkit.Exchange], err error) {
			for it := range r.Observable(t.Context()).Observe() {
				if it.Error() {
					return got, it.E
				}
				got = append(got, it.V.(dispatch.Result[testkit.Exchange]))
			}
			return got, nil
		},
		"iter": func(r *dispatch.Results[testkit.Exchange]) (got []dispatch.Result[testkit.Exchange], err error) {
			for res, err := range r.All(t.Context()) {
				if err != nil {
					return got, err
				}
				got = append(got, res)
			}
			return got, nil
		},
	}
	for name, readAll := range read {
		t.Run(name, func(t *testing.T) {
			r, err := dispatch.NewResults[testkit.Exchange](16)
			require.NoError(t, err)
			d := started(t, flux.FromSlice(xs), testkit.Perform, dispatch.WithResults(r))
			got, err := readAll(r)
			require.NoError(t, err)
			<-d.Done()
			require.Len(t, got, len(xs))
			next := map[aggregate.ID]int{}
			outcomes := map[dispatch.Outcome]int{}
			for _, res := range got {
				require.Equal(t, next[res.Exchange.ID], res.Exchange.Seq, "per-aggregate order")
				next[res.Exchange.ID]++
				outcomes[res.Outcome]++
			}
			require.Equal(t, map[dispatch.Outcome]int{dispatch.OutcomeSuccess: 598, dispatch.OutcomeError: 1, dispatch.OutcomePanic: 1}, outcomes)
			require.Zero(t, r.Dropped())
			_, err = flux.Collect(t.Context(), r.Flux())
			require.ErrorIs(t, err, dispatch.ErrSubscribed)
		})
	}
}

// A reader that never reads holds the dispatcher only until Run's stop
// timeout forced it: then the Results left over are dropped and counted.
func TestResultsStalledReaderIsBoundedByTheStopTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := dispatch.NewResults[testkit.Exchange](4)
		require.NoError(t, err)
		xs := mixed(100, 5, orders)
		d, err := dispatch.New("orders", orders, flux.FromSlice(xs), testkit.Perform, quiet,
			dispatch.WithResults(r), dispatch.WithStopTimeout(time.Second))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		synctest.Wait() // the buffer is full; the handlers wait for the reader
		require.False(t, testkit.Closed(d.Done()))
		start := time.Now()
		cancel()
		err = <-done
		require.Equal(t, time.Second, time.Since(start), "the stop took its timeout, then forced")
		require.Error(t, err)
		<-d.Done() // a force returns at once; the end follows
		s := d.Stats()
		require.Equal(t, s.Received, s.Succeeded+s.Failed+s.Discarded)
		got, err := flux.Collect(t.Context(), r.Flux())
		require.NoError(t, err)
		require.Equal(t, s.Received, int64(len(got))+r.Dropped(), "every Result read or counted as dropped")
		require.Positive(t, r.Dropped())
	})
}

// A reader that stops early abandons the stream: the dispatcher runs on
// without waiting for it, and what it did not read is counted.
func TestResultsAbandonedByTheReader(t *testing.T) {
	r, err := dispatch.NewResults[testkit.Exchange](1)
	require.NoError(t, err)
	xs := mixed(500, 7, orders)
	d := started(t, flux.FromSlice(xs), testkit.Perform, dispatch.WithResults(r))
	n := 0
	for _, err := range r.All(t.Context()) {
		require.NoError(t, err)
		if n++; n == 10 {
			break
		}
	}
	<-d.Done()
	require.NoError(t, d.Err())
	require.Equal(t, int64(len(xs)-10), r.Dropped())
}

// A Results serves one dispatcher; a negative buffer is refused.
func TestResultsRefusals(t *testing.T) {
	_, err := dispatch.NewResults[testkit.Exchange](-1)
	require.ErrorIs(t, err, dispatch.ErrInvalidArgument)
	r, err := dispatch.NewResults[testkit.Exchange](0)
	require.NoError(t, err)
	_, err = dispatch.New("a", orders, flux.Empty[testkit.Exchange](), testkit.Perform, dispatch.WithResults(r))
	require.NoError(t, err)
	_, err = dispatch.New("b", orders, flux.Empty[testkit.Exchange](), testkit.Perform, dispatch.WithResults(r))
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
	_, err = dispatch.New("c", orders, flux.Empty[testkit.Exchange](), testkit.Perform, dispatch.WithResults[testkit.Exchange](nil))
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
}

// An rxgo Observable is a dispatcher's source in one call, and its results
// an rxgo Observable again: the ends of a pipeline in rxgo, the grouping
// and ordering in between.
func TestRxgoInAndOut(t *testing.T) {
	xs := mixed(300, 9, orders)
	items := make([]any, len(xs))
	for i, x := range xs {
		items[i] = x
	}
	r, err := dispatch.NewResults[testkit.Exchange](64)
	require.NoError(t, err)
	d := started(t, flux.FromObservable[testkit.Exchange](rxgo.Just(items...)()), testkit.Perform, dispatch.WithResults(r))
	count, err := r.Observable(t.Context()).
		Filter(func(v any) bool { return v.(dispatch.Result[testkit.Exchange]).Outcome == dispatch.OutcomeSuccess }).
		Count().Get()
	require.NoError(t, err)
	require.Equal(t, int64(len(xs)), count.V)
	<-d.Done()
	require.NoError(t, d.Err())
}

// edgeResultsOf starts a dispatcher of n exchanges in one group whose
// Results, with room for buffer, it returns.
func edgeResultsOf(t *testing.T, n, buffer int) (*dispatch.Dispatcher[int], *dispatch.Results[int]) {
	t.Helper()
	r, err := dispatch.NewResults[int](buffer)
	require.NoError(t, err)
	d, err := dispatch.NewKeyed("ledger", edgeContextOfNamed, flux.FromSlice(make([]int, n)),
		func(int) int { return 0 }, func(context.Context, int) error { return nil },
		quietOf[int](), dispatch.WithParallelism(1), dispatch.WithResults(r))
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	return d, r
}

// An rxgo observer that stops reading, then cancels its ctx: the Result the
// Observable was handing over when it stopped never reached the observer,
// so it is one of the Dropped. It used to be lost from the count (read +
// Dropped one short of Received): the stream's Flux counts only what its
// downstream reports undelivered, and the rxgo bridge reported its ctx's
// cause instead.
func TestResultsObservableStoppedReaderCountsTheResultInHand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, r := edgeResultsOf(t, 20, 2)
		ctx, cancel := context.WithCancel(t.Context())
		items := r.Observable(ctx).Observe()
		read := 0
		for range 3 {
			it := <-items
			require.False(t, it.Error())
			read++
		}
		synctest.Wait() // the Observable holds the next Result, the observer reads no more
		cancel()
		for range items { // rxgo closes the channel once its producer returned
		}
		d.ForceStop()
		<-d.Done()
		require.Equal(t, d.Stats().Received, int64(read)+r.Dropped(), "read %d, dropped %d", read, r.Dropped())
	})
}

// Whenever a reader's ctx ends, concurrently with the Results it is being
// handed, read + Dropped == Received. All used to lose one Result now and
// then (once in a few hundred runs): the one its hand-over goroutine held
// when the ctx ended, which it reported as the ctx's cause, not as
// undelivered.
func TestResultsAllCancelledConcurrentlyCountsExactly(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 300).Draw(rt, "n")
		buffer := rapid.IntRange(0, 8).Draw(rt, "buffer")
		cancelAt := rapid.IntRange(1, 40).Draw(rt, "cancelAt")
		d, r := edgeResultsOf(t, n, buffer)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		read := 0
		for _, err := range r.All(ctx) {
			if err != nil {
				require.ErrorIs(t, err, context.Canceled)
				break
			}
			if read++; read == cancelAt {
				go cancel() // races with the next hand-over
			}
		}
		d.ForceStop()
		<-d.Done()
		require.Equal(t, d.Stats().Received, int64(read)+r.Dropped(), "read %d, dropped %d", read, r.Dropped())
	})
}
