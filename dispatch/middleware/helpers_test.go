package middleware_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/dispatch/middleware"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

var accounts = aggregate.MaterializedNamedAggregate{Context: "bank", Aggregate: "Account"}

// errTransient is what a flaky handler fails with before it succeeds.
var errTransient = errors.New("transient failure")

// job is an exchange whose first fails attempts fail with errTransient.
type job struct {
	id    aggregate.ID
	seq   int // among the jobs of its id, in emission order
	fails int
}

func (j job) AggregateID() aggregate.ID { return j.id }

// tagOf returns j's Recorder tag for a dispatcher of the given number of groups.
func tagOf(groups int) func(job) testkit.Tag {
	return func(j job) testkit.Tag {
		return testkit.Tag{Key: j.id.ID, Seq: j.seq, Group: aggregate.GroupKey(j.id.ID, groups)}
	}
}

// jobs returns the jobs of the given ids, fails[i] failures each, with
// per-id sequence numbers in slice order.
func jobs(ids []string, fails []int) []job {
	seqs := map[string]int{}
	out := make([]job, len(ids))
	for i, id := range ids {
		out[i] = job{id: aggregate.NewID(accounts, id), seq: seqs[id], fails: fails[i]}
		seqs[id]++
	}
	return out
}

// flaky is a handler that fails each job's first j.fails attempts.
type flaky struct {
	mu    sync.Mutex
	tries map[testkit.Tag]int
}

func newFlaky() *flaky { return &flaky{tries: map[testkit.Tag]int{}} }

func (f *flaky) handle(_ context.Context, j job) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := testkit.Tag{Key: j.id.ID, Seq: j.seq}
	f.tries[t]++
	if f.tries[t] <= j.fails {
		return errTransient
	}
	return nil
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// start returns a started dispatcher of xs (nil: Emit) with handler h,
// groups groups and a logger that discards.
func start(t tb, xs []job, h dispatch.Handler[job], groups int, opts ...dispatch.Option[job]) *dispatch.Dispatcher[job] {
	t.Helper()
	var src dispatch.Source[job]
	if xs != nil {
		src = flux.FromSlice(xs)
	}
	opts = append([]dispatch.Option[job]{dispatch.WithParallelism(groups), dispatch.WithLogger(discardLogger)}, opts...)
	d, err := dispatch.New("jobs", accounts, src, h, opts...)
	require.NoError(t, err)
	require.NoError(t, d.Prepare(context.Background()))
	require.NoError(t, d.Start())
	return d
}

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	require.TestingT
	Helper()
}

// retry returns Retry with opts, failing t on an invalid option.
func retry(t tb, opts ...middleware.RetryOption[job]) middleware.Middleware[job] {
	t.Helper()
	mw, err := middleware.Retry(opts...)
	require.NoError(t, err)
	return mw
}

// timeout returns Timeout(d), failing t on an invalid d.
func timeout(t tb, d time.Duration) middleware.Middleware[job] {
	t.Helper()
	mw, err := middleware.Timeout[job](d)
	require.NoError(t, err)
	return mw
}

// deadLetter returns DeadLetter(hook), failing t on a nil hook.
func deadLetter(t tb, hook func(context.Context, job, error) error) middleware.Middleware[job] {
	t.Helper()
	mw, err := middleware.DeadLetter(hook)
	require.NoError(t, err)
	return mw
}

// outcomes is an Observer that keeps the outcome and error of every
// finished exchange and the reason of every discarded one.
type outcomes struct {
	mu       sync.Mutex
	finished []dispatch.Outcome
	errs     []error
	reasons  []error
}

func (o *outcomes) Admitted(context.Context, dispatch.Labels)               {}
func (o *outcomes) Started(context.Context, dispatch.Labels, time.Duration) {}
func (o *outcomes) Finished(_ context.Context, _ dispatch.Labels, out dispatch.Outcome, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished, o.errs = append(o.finished, out), append(o.errs, err)
}
func (o *outcomes) Discarded(_ context.Context, _ dispatch.Labels, reason error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reasons = append(o.reasons, reason)
}

// attemptsInOrder checks the calls of every attempt (a Recorder inside
// Retry) against the number of attempts each (key, seq) was to make: per
// key, attempts started in non-decreasing seq order, so every attempt of
// seq k+1 started after the last attempt of seq k, and each exchange made
// exactly its attempts.
func attemptsInOrder(calls []testkit.Call, want map[testkit.Tag]int) error {
	byKey := map[string][]testkit.Call{}
	made := map[testkit.Tag]int{}
	for _, c := range calls {
		byKey[c.Key] = append(byKey[c.Key], c)
		made[testkit.Tag{Key: c.Key, Seq: c.Seq}]++
	}
	for key, cs := range byKey {
		slices.SortFunc(cs, func(a, b testkit.Call) int { return cmp.Compare(a.Start, b.Start) })
		for i := 1; i < len(cs); i++ {
			if cs[i].Seq < cs[i-1].Seq {
				return fmt.Errorf("key %q: an attempt of seq %d (tick %d) started after one of seq %d (tick %d)",
					key, cs[i].Seq, cs[i].Start, cs[i-1].Seq, cs[i-1].Start)
			}
		}
	}
	for tag, n := range want {
		if made[tag] != n {
			return fmt.Errorf("key %q seq %d: %d attempts, want %d", tag.Key, tag.Seq, made[tag], n)
		}
	}
	if len(made) != len(want) {
		return fmt.Errorf("%d exchanges attempted, want %d", len(made), len(want))
	}
	return nil
}

// wantAttempts returns, per job, the attempts it makes when retried
// without bound: its failures and the success.
func wantAttempts(xs []job) map[testkit.Tag]int {
	want := make(map[testkit.Tag]int, len(xs))
	for _, x := range xs {
		want[testkit.Tag{Key: x.id.ID, Seq: x.seq}] = x.fails + 1
	}
	return want
}
