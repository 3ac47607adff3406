package flux_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// discards records what a discard hook was given; safe for concurrent use.
type discards struct {
	mu      sync.Mutex
	items   []int
	reasons []error
}

func (d *discards) hook(v int, reason error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.items = append(d.items, v)
	d.reasons = append(d.reasons, reason)
}

func (d *discards) got() ([]int, []error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.items...), append([]error(nil), d.reasons...)
}

// Reactor's cases of the backpressure operators (FluxOnBackpressureBufferTest,
// FluxOnBackpressureBufferStrategyTest, FluxOnBackpressureDropTest,
// FluxOnBackpressureLatestTest), translated: the consumer is busy with item 1
// until the producer, on its own goroutine, has pushed 2..5 (or failed to),
// so what the operator kept and dropped is decided by its policy alone.
func TestOnBackpressure(t *testing.T) {
	leakFree(t)
	cases := []struct {
		name      string
		op        func(flux.Flux[int]) flux.Flux[int]
		tail      error // the producer's terminal signal
		want      []int
		discarded []int
		reason    error // of every discarded item
		err       error // the flow's end; nil: completes
	}{
		{name: "buffer fits", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureBuffer(4, flux.OverflowError) },
			want: []int{1, 2, 3, 4, 5}},
		{name: "buffer error on overflow, after the buffered items", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureBuffer(2, flux.OverflowError) },
			want: []int{1, 2, 3}, discarded: []int{4}, reason: flux.ErrOverflow, err: flux.ErrOverflow},
		{name: "buffer drop latest", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureBuffer(2, flux.OverflowDropLatest) },
			want: []int{1, 2, 3}, discarded: []int{4, 5}, reason: flux.ErrOverflow},
		{name: "buffer drop oldest", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureBuffer(2, flux.OverflowDropOldest) },
			want: []int{1, 4, 5}, discarded: []int{2, 3}, reason: flux.ErrOverflow},
		{name: "buffer: the upstream's error after the buffered items", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureBuffer(4, flux.OverflowError) },
			tail: errBoom, want: []int{1, 2, 3, 4, 5}, err: errBoom},
		{name: "buffer: an early stop discards the buffered items", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureBuffer(4, flux.OverflowError).Take(2) },
			want: []int{1, 2}, discarded: []int{3, 4, 5}, reason: flux.ErrCancelled},
		{name: "drop while the consumer is busy", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureDrop() },
			want: []int{1}, discarded: []int{2, 3, 4, 5}, reason: flux.ErrOverflow},
		{name: "drop: the upstream's error", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureDrop() },
			tail: errBoom, want: []int{1}, discarded: []int{2, 3, 4, 5}, reason: flux.ErrOverflow, err: errBoom},
		{name: "latest keeps the last", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureLatest() },
			want: []int{1, 5}, discarded: []int{2, 3, 4}, reason: flux.ErrOverflow},
		{name: "latest: the upstream's error after the latest", op: func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureLatest() },
			tail: errBoom, want: []int{1, 5}, discarded: []int{2, 3, 4}, reason: flux.ErrOverflow, err: errBoom},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			busy, pushed := make(chan struct{}), make(chan struct{})
			src := flux.Create(func(_ context.Context, s flux.Sink[int]) error {
				if err := s.Next(1); err != nil {
					return err
				}
				<-busy
				defer close(pushed)
				for v := 2; v <= 5; v++ {
					if err := s.Next(v); err != nil {
						return err
					}
				}
				return c.tail
			})
			var d discards
			var got []int
			err := flux.DoOnDiscard(c.op(src), d.hook).Subscribe(t.Context(), func(v int) error {
				got = append(got, v)
				if v == 1 {
					close(busy)
					<-pushed
				}
				return nil
			})
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, c.want, got)
			items, reasons := d.got()
			require.Equal(t, c.discarded, items)
			for _, r := range reasons {
				require.ErrorIs(t, r, c.reason)
			}
		})
	}
}

// Whatever the speeds, every item pushed is delivered or discarded, never
// both, and the delivered ones keep their order.
func TestOnBackpressureAccountsForEveryItem(t *testing.T) {
	leakFree(t)
	const n = 5000
	ops := map[string]func(flux.Flux[int]) flux.Flux[int]{
		"buffer drop oldest": func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureBuffer(8, flux.OverflowDropOldest) },
		"buffer drop latest": func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureBuffer(8, flux.OverflowDropLatest) },
		"drop":               func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureDrop() },
		"latest":             func(f flux.Flux[int]) flux.Flux[int] { return f.OnBackpressureLatest() },
		"buffer then take": func(f flux.Flux[int]) flux.Flux[int] {
			return f.OnBackpressureBuffer(8, flux.OverflowDropOldest).Take(100)
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			var d discards
			var got []int
			err := flux.DoOnDiscard(op(flux.Range(0, n)), d.hook).Subscribe(t.Context(), func(v int) error {
				got = append(got, v)
				if v%7 == 0 { // a slower item now and then
					for i := 0; i < 1000; i++ {
						_ = errors.New("work")
					}
				}
				return nil
			})
			require.NoError(t, err)
			require.NotEmpty(t, got)
			require.IsIncreasing(t, got)
			items, _ := d.got()
			seen := make(map[int]int, n)
			for _, v := range append(got, items...) {
				seen[v]++
			}
			if name != "buffer then take" {
				require.Len(t, seen, n, "every item delivered or discarded")
			}
			for v := range len(seen) {
				if seen[v] != 1 {
					t.Fatalf("item %d delivered or discarded %d times", v, seen[v])
				}
			}
		})
	}
}

// In virtual time: a ticker every 1 ms against a consumer that works
// 10.25 ms per item. Interval alone skips the ticks (its values stay
// consecutive); OnBackpressureLatest lets the ticker run and hands the
// consumer the newest value, the others discarded; a buffer of 3 with
// OverflowError overflows at the fifth tick and fails once the three
// buffered values were handled.
func TestOnBackpressureVirtualTime(t *testing.T) {
	work := 10250 * time.Microsecond
	run := func(t *testing.T, f flux.Flux[int]) ([]int, []int, time.Duration, error) {
		var d discards
		var got []int
		start := time.Now()
		err := flux.DoOnDiscard(f, d.hook).Subscribe(t.Context(), func(v int) error {
			got = append(got, v)
			time.Sleep(work) // the consumer's work, in virtual time
			return nil
		})
		items, _ := d.got()
		// The upstream's goroutine and the stopping subscriber discard
		// concurrently: the hook's order across them is not the items'.
		slices.Sort(items)
		return got, items, time.Since(start), err
	}
	t.Run("interval alone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			got, discarded, _, err := run(t, flux.Interval(time.Millisecond).Take(4))
			require.NoError(t, err)
			require.Equal(t, []int{0, 1, 2, 3}, got)
			require.Empty(t, discarded)
		})
	})
	t.Run("latest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			got, discarded, _, err := run(t, flux.Interval(time.Millisecond).OnBackpressureLatest().Take(4))
			require.NoError(t, err)
			require.Equal(t, []int{0, 10, 20, 30}, got)
			var want []int
			// Take stops once the consumer returned from 30, at 41.75 ms:
			// 31..41 came meanwhile.
			for v := 1; v <= 41; v++ {
				if v != 10 && v != 20 && v != 30 {
					want = append(want, v)
				}
			}
			require.Equal(t, want, discarded)
		})
	})
	t.Run("buffer overflow error", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			got, discarded, took, err := run(t, flux.Interval(time.Millisecond).OnBackpressureBuffer(3, flux.OverflowError))
			require.ErrorIs(t, err, flux.ErrOverflow)
			require.ErrorContains(t, err, "OnBackpressureBuffer")
			require.Equal(t, []int{0, 1, 2, 3}, got)
			require.Equal(t, []int{4}, discarded)
			require.Equal(t, time.Millisecond+4*work, took)
		})
	})
}

// The end of ctx stops a consumer waiting for the next item and the
// producer, whose goroutine is joined before Subscribe returns.
func TestOnBackpressureContextEnd(t *testing.T) {
	leakFree(t)
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan struct{})
	src := flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		if err := s.Next(1); err != nil {
			return err
		}
		<-ctx.Done() // a producer waiting for its next event
		return ctx.Err()
	})
	done := make(chan error, 1)
	go func() {
		done <- src.OnBackpressureBuffer(4, flux.OverflowError).Subscribe(ctx, func(int) error {
			close(first)
			return nil
		})
	}()
	<-first
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Subscribe did not return after ctx ended")
	}
}

func TestOnBackpressureInvalidArguments(t *testing.T) {
	src := flux.Just(1)
	for name, f := range map[string]flux.Flux[int]{
		"size 0":           src.OnBackpressureBuffer(0, flux.OverflowError),
		"unknown overflow": src.OnBackpressureBuffer(1, flux.BufferOverflow(7)),
	} {
		err := f.Subscribe(t.Context(), func(int) error { return nil })
		require.ErrorIs(t, err, flux.ErrInvalidArgument, name)
		require.ErrorContains(t, err, "OnBackpressureBuffer", name)
	}
}
