package partition_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

var errRefused = errors.New("refused")

// attempt is one handler call.
type attempt struct {
	id      string
	pos     int64
	attempt int
	at      time.Duration // since the test began, in virtual time
}

// calls records the handler's calls.
type calls struct {
	t0 time.Time
	mu sync.Mutex
	xs []attempt
}

func (c *calls) add(d partition.Delivery[op]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.xs = append(c.xs, attempt{d.Exchange.id, d.Position, d.Attempt, time.Since(c.t0)})
}

func (c *calls) of(pos int64) []attempt {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []attempt
	for _, x := range c.xs {
		if x.pos == pos {
			out = append(out, x)
		}
	}
	return out
}

// idsSharing returns an id other than of whose group (among groups) is
// of's when same, another one when not.
func idsSharing(of string, groups int, same bool) string {
	for i := 0; ; i++ {
		id := fmt.Sprint("id", i)
		if id != of && (partition.GroupKey(id, groups) == partition.GroupKey(of, groups)) == same {
			return id
		}
	}
}

func failureDispatcher(t *testing.T, h func(context.Context, partition.Delivery[op]) error, opts ...partition.Option) *partition.Dispatcher[op] {
	t.Helper()
	d, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 4), func(x op) string { return x.id }, h,
		append([]partition.Option{partition.WithGroups(4)}, opts...)...)
	require.NoError(t, err)
	return d
}

// A failing delivery is retried in place with a backoff never shorter than
// the minimum, growing by the factor; the next delivery of its aggregate,
// and one of another aggregate in the same group, wait for its last
// attempt, while another group goes on at once.
func TestFailureRetryInOrderWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const groups = 4
		same, other := idsSharing("a", groups, true), idsSharing("a", groups, false)
		rec := &calls{t0: time.Now()}
		d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
			rec.add(x)
			if x.Position == 1 && x.Attempt < 3 {
				return errRefused
			}
			return nil
		}, partition.WithFailurePolicy(partition.FailurePolicy{Retries: 5,
			Backoff: partition.Backoff{Min: 100 * time.Millisecond, Max: time.Second, Factor: 2, Jitter: 0.5}}))
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		for i, id := range []string{"a", "a", same, other} {
			require.NoError(t, in.Deliver(t.Context(), op{id, i}, int64(i+1), 1))
		}
		settled, err := d.Revoke(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, int64(4), settled.Prefix, "every position finished")

		first := rec.of(1)
		require.Len(t, first, 3, "two retries, then success")
		for i, c := range first {
			require.Equal(t, i+1, c.attempt, "the attempt grows in place")
		}
		w1, w2 := first[1].at-first[0].at, first[2].at-first[1].at
		require.GreaterOrEqual(t, w1, 100*time.Millisecond, "never shorter than the minimum")
		require.LessOrEqual(t, w1, 150*time.Millisecond, "at most the jitter longer")
		require.GreaterOrEqual(t, w2, 200*time.Millisecond, "the factor")
		require.LessOrEqual(t, w2, 300*time.Millisecond)

		last := first[2].at
		require.GreaterOrEqual(t, rec.of(2)[0].at, last, "the aggregate's next delivery waits")
		require.GreaterOrEqual(t, rec.of(3)[0].at, last, "an aggregate of the same group waits")
		require.Zero(t, rec.of(4)[0].at, "another group goes on at once")
		require.Equal(t, partition.FailureStats{Retries: 2}, d.Failures())
	})
}

// Once the retries are spent (or MaxElapsed passed) the delivery is
// settled: finished with a WARN line naming its last attempt.
func TestFailureRetriesSpentThenSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testkit.LogCapture{Level: slog.LevelInfo}
		rec := &calls{t0: time.Now()}
		d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
			rec.add(x)
			return errRefused
		}, partition.WithLogger(slog.New(logs)), partition.WithFailurePolicy(partition.FailurePolicy{Retries: 2,
			Backoff: partition.Backoff{Min: 500 * time.Millisecond, Max: 500 * time.Millisecond}}))
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		require.NoError(t, in.Deliver(t.Context(), op{"a", 0}, 1, 1))
		settled, err := d.Revoke(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, partition.Settled{Partition: 0, Prefix: 1, OK: true,
			Stats: dispatch.Stats{Received: 1, Failed: 1}}, settled)
		require.Len(t, rec.of(1), 3)
		require.Equal(t, time.Second, rec.of(1)[2].at)
		require.Equal(t, partition.FailureStats{Retries: 2, Settled: 1}, d.Failures())
		warns := warnings(logs)
		require.NotEmpty(t, warns)
		end := warns[len(warns)-1]
		require.Equal(t, "partition: handler failed, settled", end.Message)
		require.Equal(t, int64(3), end.Attrs["attempt"])
		require.NotContains(t, end.Attrs, "folded", "the retries' lines are limited apart from the outcomes'")
		require.Len(t, warns, 2, "the second retry's line, within the interval of the first, was folded")
		require.Equal(t, "partition: handler failed, retrying", warns[0].Message)

		// MaxElapsed alone bounds the retries: waits of 1 s then 2 s fit
		// in 3.5 s, the third (4 s) would not.
		rec = &calls{t0: time.Now()}
		d = failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
			rec.add(x)
			return errRefused
		}, partition.WithFailurePolicy(partition.FailurePolicy{MaxElapsed: 3500 * time.Millisecond,
			Backoff: partition.Backoff{Min: time.Second, Max: time.Minute}}))
		in, err = d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		require.NoError(t, in.Deliver(t.Context(), op{"a", 0}, 1, 1))
		_, err = d.Revoke(t.Context(), 0)
		require.NoError(t, err)
		require.Len(t, rec.of(1), 3)
		require.Equal(t, 3*time.Second, rec.of(1)[2].at)
	})
}

// A force (Revoke's deadline) cancels a backoff wait at once, and the
// retried position is not finished: the prefix stops below it.
func TestFailureForceCancelsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &calls{t0: time.Now()}
		d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
			rec.add(x)
			if x.Position == 2 {
				return errRefused
			}
			return nil
		}, partition.WithFailurePolicy(partition.FailurePolicy{Retries: 5, Backoff: partition.Backoff{Min: time.Hour}}))
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		for i, id := range []string{"a", "a", idsSharing("a", 4, false)} {
			require.NoError(t, in.Deliver(t.Context(), op{id, i}, int64(i+1), 1))
		}
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		settled, err := d.Revoke(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, 10*time.Millisecond, time.Since(start), "the hour's wait was cut short")
		require.True(t, settled.Forced)
		require.Equal(t, int64(1), settled.Prefix, "position 2 was not finished")
		blocked, ok := in.Tracker().Blocked()
		require.True(t, ok)
		require.Equal(t, int64(2), blocked)
		require.Len(t, rec.of(2), 1, "no retry after the force")
		require.Equal(t, dispatch.Stats{Received: 3, Succeeded: 2, Failed: 1}, settled.Stats, "failed as cancelled")
		require.Equal(t, partition.FailureStats{}, d.Failures(), "a cancelled outcome is no failure")
	})
}

// A handler's panic is a failure like an error: retried, then settled.
func TestFailurePanicIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &calls{t0: time.Now()}
		d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
			rec.add(x)
			if x.Attempt == 1 {
				panic("boom")
			}
			return nil
		}, partition.WithFailurePolicy(partition.FailurePolicy{Retries: 1}))
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		require.NoError(t, in.Deliver(t.Context(), op{"a", 0}, 1, 1))
		settled, err := d.Revoke(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), settled.Prefix)
		require.Equal(t, dispatch.Stats{Received: 1, Succeeded: 1}, settled.Stats)
		require.Len(t, rec.of(1), 2)
		require.Equal(t, partition.FailureStats{Retries: 1}, d.Failures())
	})
}

// Stop fails the consumer with the error, and the position is not
// finished: the prefix stops below it while the other groups finish.
func TestFailureStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var stops []error
		d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
			if x.Position == 2 {
				return errRefused
			}
			return nil
		}, partition.WithFailurePolicy(partition.FailurePolicy{Then: partition.Stop()}),
			partition.WithFailureActions(partition.FailureActions{Stop: func(err error) {
				mu.Lock()
				stops = append(stops, err)
				mu.Unlock()
			}}))
		in, err := d.Assign(t.Context(), 3, 1)
		require.NoError(t, err)
		for i, id := range []string{"a", "a", idsSharing("a", 4, false)} {
			require.NoError(t, in.Deliver(t.Context(), op{id, i}, int64(i+1), 1))
		}
		settled, err := d.Revoke(t.Context(), 3)
		require.NoError(t, err)
		require.Equal(t, int64(1), settled.Prefix, "everything before it, not it")
		require.Len(t, stops, 1)
		require.ErrorIs(t, stops[0], partition.ErrHandlerFailed)
		require.ErrorIs(t, stops[0], errRefused)
		require.ErrorContains(t, stops[0], `partition 3, position 2, aggregate "a", attempt 1`)
		require.Equal(t, partition.FailureStats{Stopped: 1}, d.Failures())
	})
}

// DeadLetter publishes the failed delivery and finishes its position only
// once the publisher confirmed: a failed publication is tried again with
// the backoff; a force during those tries leaves the position unfinished.
func TestFailureDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var in *partition.Intake[op]
		var letters []partition.Letter
		var prefixes []int64
		fails := 2
		d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
			if x.Position == 2 {
				return errRefused
			}
			return nil
		}, partition.WithFailurePolicy(partition.FailurePolicy{Retries: 1, Then: partition.DeadLetter("dlq"),
			Backoff: partition.Backoff{Min: time.Second, Max: time.Second}}),
			partition.WithFailureActions(partition.FailureActions{DeadLetter: func(_ context.Context, l partition.Letter) error {
				p, _ := in.Prefix()
				prefixes = append(prefixes, p)
				if fails > 0 {
					fails--
					return errors.New("no stream")
				}
				letters = append(letters, l)
				return nil
			}}))
		var err error
		in, err = d.Assign(t.Context(), 1, 1)
		require.NoError(t, err)
		start := time.Now()
		for i, id := range []string{"a", "a", "a"} {
			require.NoError(t, in.Deliver(t.Context(), op{id, i}, int64(i+1), 1))
		}
		settled, err := d.Revoke(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, int64(3), settled.Prefix)
		require.Equal(t, 3*time.Second, time.Since(start), "a retry, then two publications tried again, a second each")
		require.Equal(t, []int64{1, 1, 1}, prefixes, "not finished before the publication was confirmed")
		require.Len(t, letters, 1)
		l := letters[0]
		require.Equal(t, partition.Letter{To: "dlq", Partition: 1, Position: 2, AggregateID: "a", Attempt: 2, Err: l.Err}, l)
		require.ErrorIs(t, l.Err, errRefused)
		require.Equal(t, partition.FailureStats{Retries: 1, DeadLettered: 1, DeadLetterErrors: 2}, d.Failures())

		// The publisher never succeeds: a force ends the tries, and the
		// position stays unfinished.
		d = failureDispatcher(t, func(context.Context, partition.Delivery[op]) error { return errRefused },
			partition.WithFailurePolicy(partition.FailurePolicy{Then: partition.DeadLetter("dlq")}),
			partition.WithFailureActions(partition.FailureActions{DeadLetter: func(context.Context, partition.Letter) error {
				return errors.New("no stream")
			}}))
		in, err = d.Assign(t.Context(), 1, 1)
		require.NoError(t, err)
		require.NoError(t, in.Deliver(t.Context(), op{"a", 0}, 1, 1))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		settled, err = d.Revoke(ctx, 1)
		require.NoError(t, err)
		require.False(t, settled.OK, "position 1 never finished")
		require.True(t, settled.Forced)
		require.Positive(t, d.Failures().DeadLetterErrors)
		require.Zero(t, d.Failures().DeadLettered)
	})
}

// Invalid policies are refused by NewDispatcher, naming the field.
func TestFailurePolicyInvalid(t *testing.T) {
	sched := newParallel(t, 1)
	for _, c := range []struct {
		p    partition.FailurePolicy
		a    partition.FailureActions
		want string
	}{
		{partition.FailurePolicy{Retries: -1}, partition.FailureActions{}, "FailurePolicy.Retries -1 is negative"},
		{partition.FailurePolicy{MaxElapsed: -time.Second}, partition.FailureActions{}, "FailurePolicy.MaxElapsed -1s is negative"},
		{partition.FailurePolicy{Backoff: partition.Backoff{Min: -1}}, partition.FailureActions{}, "FailurePolicy.Backoff.Min"},
		{partition.FailurePolicy{Backoff: partition.Backoff{Min: time.Second, Max: time.Millisecond}}, partition.FailureActions{}, "FailurePolicy.Backoff.Max"},
		{partition.FailurePolicy{Backoff: partition.Backoff{Factor: 0.5}}, partition.FailureActions{}, "FailurePolicy.Backoff.Factor"},
		{partition.FailurePolicy{Backoff: partition.Backoff{Jitter: 2}}, partition.FailureActions{}, "FailurePolicy.Backoff.Jitter"},
		{partition.FailurePolicy{Then: partition.DeadLetter("")}, partition.FailureActions{DeadLetter: func(context.Context, partition.Letter) error { return nil }}, "FailurePolicy.Then: DeadLetter with an empty destination"},
		{partition.FailurePolicy{Then: partition.DeadLetter("dlq")}, partition.FailureActions{}, "FailurePolicy.Then: DeadLetter(\"dlq\") needs a publisher"},
		{partition.FailurePolicy{Then: partition.Stop()}, partition.FailureActions{}, "FailurePolicy.Then: Stop needs"},
	} {
		_, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
			func(context.Context, partition.Delivery[op]) error { return nil },
			partition.WithFailurePolicy(c.p), partition.WithFailureActions(c.a))
		require.ErrorIs(t, err, partition.ErrInvalidArgument, c.want)
		require.ErrorContains(t, err, c.want)
	}
}

// A handler's runtime.Goexit cannot be retried nor published from the
// exiting goroutine: under a policy that retries then dead-letters or
// stops, it stops, and its position is not finished; under the default it
// is settled.
func TestFailureGoexit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stops []error
		h := func(_ context.Context, x partition.Delivery[op]) error {
			if x.Position == 2 {
				runtime.Goexit()
			}
			return nil
		}
		d := failureDispatcher(t, h, partition.WithFailurePolicy(partition.FailurePolicy{Retries: 3, Then: partition.DeadLetter("dlq")}),
			partition.WithFailureActions(partition.FailureActions{
				DeadLetter: func(context.Context, partition.Letter) error { return nil },
				Stop:       func(err error) { stops = append(stops, err) }}))
		in, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		for i := range 3 {
			require.NoError(t, in.Deliver(t.Context(), op{"a", i}, int64(i+1), 1))
		}
		settled, err := d.Revoke(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), settled.Prefix, "the Goexit's position is not finished")
		require.Len(t, stops, 1)
		require.ErrorIs(t, stops[0], partition.ErrHandlerFailed)
		require.ErrorIs(t, stops[0], schedulers.ErrGoexit)
		require.Equal(t, partition.FailureStats{Stopped: 1}, d.Failures())

		d = failureDispatcher(t, h)
		in, err = d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		for i := range 3 {
			require.NoError(t, in.Deliver(t.Context(), op{"a", i}, int64(i+1), 1))
		}
		settled, err = d.Revoke(t.Context(), 0)
		require.NoError(t, err)
		require.Equal(t, int64(3), settled.Prefix, "settled by default")
		require.Equal(t, partition.FailureStats{Settled: 1}, d.Failures())
	})
}

// For any Backoff, each wait is at least Min x Factor^(n-1) capped at Max
// (so never shorter than Min), at most Jitter longer, and never above Max.
func TestFailureBackoffBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		b := partition.Backoff{
			Min:    time.Duration(rapid.IntRange(1, 1000).Draw(rt, "min ms")) * time.Millisecond,
			Factor: rapid.Float64Range(1, 4).Draw(rt, "factor"),
			Jitter: rapid.Float64Range(0, 1).Draw(rt, "jitter"),
		}
		b.Max = b.Min * time.Duration(rapid.IntRange(1, 50).Draw(rt, "max/min"))
		retries := rapid.IntRange(1, 8).Draw(rt, "retries")
		synctest.Test(t, func(t *testing.T) {
			rec := &calls{t0: time.Now()}
			d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
				rec.add(x)
				return errRefused
			}, partition.WithFailurePolicy(partition.FailurePolicy{Retries: retries, Backoff: b}),
				partition.WithLogger(slog.New(&testkit.LogCapture{Level: slog.LevelError})))
			in, err := d.Assign(t.Context(), 0, 1)
			require.NoError(t, err)
			require.NoError(t, in.Deliver(t.Context(), op{"a", 0}, 1, 1))
			_, err = d.Revoke(t.Context(), 0)
			require.NoError(t, err)
			cs := rec.of(1)
			require.Len(t, cs, retries+1)
			for n := 1; n <= retries; n++ {
				wait := cs[n].at - cs[n-1].at
				base := time.Duration(min(float64(b.Min)*math.Pow(b.Factor, float64(n-1)), float64(b.Max)))
				require.GreaterOrEqual(t, wait, base-time.Nanosecond, "wait %d of %+v", n, b)
				require.GreaterOrEqual(t, wait, b.Min, "never shorter than the minimum")
				require.LessOrEqual(t, wait, min(b.Max, base+time.Duration(float64(base)*b.Jitter)+time.Nanosecond), "wait %d of %+v", n, b)
			}
		})
	})
}

// A log handler that panics costs the failure's line, never its outcome:
// the settled position finishes, the dead-lettered one too (it does not
// turn into a stop).
func TestFailureLogHandlerPanicCostsOnlyTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, p := range []partition.FailurePolicy{{}, {Retries: 1, Then: partition.DeadLetter("dlq")}} {
			var stops []error
			d := failureDispatcher(t, func(_ context.Context, x partition.Delivery[op]) error {
				if x.Position == 2 {
					return errRefused
				}
				return nil
			}, partition.WithLogger(slog.New(&testkit.LogPanic{})), partition.WithFailurePolicy(p),
				partition.WithFailureActions(partition.FailureActions{
					DeadLetter: func(context.Context, partition.Letter) error { return nil },
					Stop:       func(err error) { stops = append(stops, err) }}))
			in, err := d.Assign(t.Context(), 0, 1)
			require.NoError(t, err)
			for i := range 3 {
				require.NoError(t, in.Deliver(t.Context(), op{"a", i}, int64(i+1), 1))
			}
			settled, err := d.Revoke(t.Context(), 0)
			require.NoError(t, err)
			require.Equal(t, int64(3), settled.Prefix, "%v: every position finished", p.Then)
			require.Empty(t, stops)
			f := d.Failures()
			require.Equal(t, int64(1), f.Settled+f.DeadLettered, "%+v", f)
		}
	})
}

// warnings returns the WARN records logs kept, in order.
func warnings(logs *testkit.LogCapture) []testkit.LogRecord {
	return logs.Records(func(r testkit.LogRecord) bool { return r.Level == slog.LevelWarn })
}

// A failing handler under the default policy is settled with a WARN line
// that names the partition, the position, the aggregate, the attempt and
// the error, seen at the default level (Info); a partition logs at most one
// line a second, the next saying how many were folded into it.
func TestFailureSettledWarnsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &testkit.LogCapture{Level: slog.LevelInfo}
		d, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 2), func(x op) string { return x.id },
			func(_ context.Context, x partition.Delivery[op]) error {
				return fmt.Errorf("refused %s", x.Exchange.id)
			}, partition.WithLogger(slog.New(logs)))
		require.NoError(t, err)
		p0, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		p1, err := d.Assign(t.Context(), 1, 1)
		require.NoError(t, err)
		for i := range 5 {
			require.NoError(t, p0.Deliver(t.Context(), op{fmt.Sprint("a", i), 0}, int64(i+1), 1))
		}
		require.NoError(t, p1.Deliver(t.Context(), op{"b", 0}, 7, 2))
		synctest.Wait()
		warns := warnings(logs)
		require.Len(t, warns, 2, "one line per partition: %v", warns)
		byPartition := map[int64]testkit.LogRecord{}
		for _, w := range warns {
			byPartition[w.Attrs["partition"].(int64)] = w
		}
		w := byPartition[0]
		pos := w.Attrs["position"].(int64)
		require.Equal(t, fmt.Sprint("a", pos-1), w.Attrs["aggregate_id"])
		require.Equal(t, int64(1), w.Attrs["attempt"])
		require.EqualError(t, w.Attrs["error"].(error), fmt.Sprint("refused a", pos-1))
		require.NotContains(t, w.Attrs, "folded")
		require.Equal(t, testkit.LogRecord{Level: slog.LevelWarn, Message: w.Message, Attrs: map[string]any{"dispatcher": "accounts",
			"partition": int64(1), "position": int64(7), "aggregate_id": "b", "attempt": int64(2),
			"error": byPartition[1].Attrs["error"]}}, byPartition[1])

		time.Sleep(time.Second) // virtual: the interval passes
		require.NoError(t, p0.Deliver(t.Context(), op{"c", 0}, 9, 1))
		synctest.Wait()
		warns = warnings(logs)
		require.Len(t, warns, 3)
		require.Equal(t, int64(9), warns[2].Attrs["position"])
		require.Equal(t, int64(4), warns[2].Attrs["folded"], "the four lines of partition 0 not logged")
		_, err = d.Close(t.Context())
		require.NoError(t, err)
	})
}

// A delivery that fails without the policy deciding about it (the id
// function panicked, so no handler ran; or its own ctx, from
// WithContextOf, ended without a force, so the retries could not go on)
// is not settled behind a policy that dead-letters or stops: it stops the
// consumer and its position is not finished, as a Goexit's.
func TestFailureUndecidedStops(t *testing.T) {
	for _, c := range []struct {
		name string
		idOf func(op) string
		opts []partition.Option
	}{
		{name: "id function panics", idOf: func(x op) string {
			if x.seq == 1 {
				panic("no id")
			}
			return x.id
		}},
		{name: "own ctx ended", idOf: func(x op) string { return x.id },
			opts: []partition.Option{partition.WithDispatchOptions(dispatch.WithContextOf(
				func(ctx context.Context, x partition.Delivery[op]) context.Context {
					if x.Exchange.seq != 1 {
						return ctx
					}
					ctx, cancel := context.WithCancel(ctx)
					cancel() // a deadline of its own, passed
					return ctx
				}))}},
	} {
		for _, then := range []partition.Final{partition.Stop(), partition.DeadLetter("dlq")} {
			t.Run(c.name+", "+then.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var mu sync.Mutex
					var stops []error
					letters := 0
					opts := append([]partition.Option{partition.WithGroups(4), partition.WithLogger(slog.New(slog.DiscardHandler)),
						partition.WithFailurePolicy(partition.FailurePolicy{Retries: 2, Then: then}),
						partition.WithFailureActions(partition.FailureActions{
							DeadLetter: func(context.Context, partition.Letter) error {
								mu.Lock()
								letters++
								mu.Unlock()
								return nil
							},
							Stop: func(err error) {
								mu.Lock()
								stops = append(stops, err)
								mu.Unlock()
							}})}, c.opts...)
					d, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 4), c.idOf,
						func(ctx context.Context, _ partition.Delivery[op]) error { return ctx.Err() }, opts...)
					require.NoError(t, err)
					in, err := d.Assign(t.Context(), 0, 1)
					require.NoError(t, err)
					for i := range 3 {
						require.NoError(t, in.Deliver(t.Context(), op{"a", i}, int64(i+1), 1))
					}
					settled, err := d.Revoke(t.Context(), 0)
					require.NoError(t, err)
					require.Equal(t, int64(1), settled.Prefix, "position 2 is not acknowledged past")
					require.Len(t, stops, 1)
					require.ErrorIs(t, stops[0], partition.ErrHandlerFailed)
					require.ErrorContains(t, stops[0], "partition 0, position 2")
					require.Zero(t, letters)
					require.Equal(t, partition.FailureStats{Stopped: 1}, d.Failures())
				})
			})
		}
	}
}

// A handler that a force cancels midway and that then panics (a "must" on
// the context's error) or calls runtime.Goexit did not finish its work: its
// position must block the prefix like a cancelled one, so that the next
// owner gets it again. It used to count as finished (OutcomePanic finishes a
// position) and the prefix passed it.
func TestForcedPanicDoesNotFinishItsPosition(t *testing.T) {
	for name, fail := range map[string]func(error){
		"panic":  func(err error) { panic(err) },
		"goexit": func(error) { runtime.Goexit() },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				quiet := slog.New(slog.DiscardHandler)
				sched, err := schedulers.NewParallel("accounts", 2, schedulers.WithLogger(quiet))
				require.NoError(t, err)
				defer func() { sched.Dispose(); <-sched.Done() }()
				d, err := partition.NewDispatcher("accounts", accounts, sched, func(x op) string { return x.id },
					func(ctx context.Context, x partition.Delivery[op]) error {
						if x.Position == 2 {
							<-ctx.Done()
							fail(ctx.Err())
						}
						return nil
					}, partition.WithGroups(4), partition.WithLogger(quiet))
				require.NoError(t, err)
				in, err := d.Assign(t.Context(), 0, 1)
				require.NoError(t, err)
				require.NoError(t, in.Deliver(t.Context(), op{"a", 0}, 1, 1))
				require.NoError(t, in.Deliver(t.Context(), op{"b", 0}, 2, 1))
				require.NoError(t, in.Deliver(t.Context(), op{"c", 0}, 3, 1))
				synctest.Wait()
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
				defer cancel()
				settled, err := d.Revoke(ctx, 0)
				require.NoError(t, err)
				require.True(t, settled.Forced)
				require.True(t, settled.OK)
				require.Equal(t, int64(1), settled.Prefix, "the prefix stops below the forced position")
				blocked, ok := in.Tracker().Blocked()
				require.True(t, ok)
				require.Equal(t, int64(2), blocked)
			})
		})
	}
}
