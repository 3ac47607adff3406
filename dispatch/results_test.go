package dispatch_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reactivex/rxgo/v2"
	"github.com/stretchr/testify/require"

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
		require.False(t, isClosed(d.Done()))
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
