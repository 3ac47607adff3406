package flux_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// recorder is an slog.Handler keeping each record as "msg k=v ...", the
// attribute "category" left out; it panics on Handle while boom is set.
type recorder struct {
	mu    sync.Mutex
	lines []string
	level slog.Level
	boom  bool
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler           { return r }
func (r *recorder) WithGroup(string) slog.Handler                { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	if r.boom {
		panic("handler")
	}
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key != "category" {
			line += " " + a.Key + "=" + a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, rec.Level.String()+" "+line)
	r.mu.Unlock()
	return nil
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// Reactor's cases of log() (FluxLogTest, SignalLoggerTests), translated:
// each signal is one record, in order, at the level asked.
func TestLog(t *testing.T) {
	leakFree(t)
	cases := []struct {
		name  string
		build func(l *slog.Logger) flux.Flux[int]
		level slog.Level // the handler's; 0: slog.LevelDebug
		want  []string
		err   error
	}{
		{name: "complete", build: func(l *slog.Logger) flux.Flux[int] { return flux.Just(1, 2).Log(l, "test") },
			want: []string{"DEBUG onSubscribe", "DEBUG onNext value=1", "DEBUG onNext value=2", "DEBUG onComplete"}},
		{name: "error", build: func(l *slog.Logger) flux.Flux[int] {
			return flux.Concat(flux.Just(1), flux.Error[int](errBoom)).Log(l, "test")
		}, want: []string{"DEBUG onSubscribe", "DEBUG onNext value=1", "DEBUG onError error=boom"}, err: errBoom},
		{name: "cancel by take", build: func(l *slog.Logger) flux.Flux[int] { return flux.Range(1, 10).Log(l, "test").Take(1) },
			want: []string{"DEBUG onSubscribe", "DEBUG onNext value=1", "DEBUG cancel cause=" + flux.ErrCancelled.Error()}},
		{name: "empty", build: func(l *slog.Logger) flux.Flux[int] { return flux.Empty[int]().Log(l, "") },
			want: []string{"DEBUG onSubscribe", "DEBUG onComplete"}},
		{name: "level option", build: func(l *slog.Logger) flux.Flux[int] {
			return flux.Just(7).Log(l, "test", flux.WithLogLevel(slog.LevelWarn))
		},
			level: slog.LevelWarn, want: []string{"WARN onSubscribe", "WARN onNext value=7", "WARN onComplete"}},
		{name: "disabled level records nothing", build: func(l *slog.Logger) flux.Flux[int] { return flux.Just(7).Log(l, "test") },
			level: slog.LevelWarn},
		{name: "inside a Name", build: func(l *slog.Logger) flux.Flux[int] { return flux.Just(3).Log(l, "test").Name("orders") },
			want: []string{"DEBUG onSubscribe name=orders", "DEBUG onNext name=orders value=3", "DEBUG onComplete name=orders"}},
		{name: "the nearest Name wins", build: func(l *slog.Logger) flux.Flux[int] { return flux.Just(3).Log(l, "test").Name("inner").Name("outer") },
			want: []string{"DEBUG onSubscribe name=inner", "DEBUG onNext name=inner value=3", "DEBUG onComplete name=inner"}},
		{name: "per subscription", build: func(l *slog.Logger) flux.Flux[int] {
			f := flux.Just(1).Log(l, "test")
			return flux.Concat(f, f)
		}, want: []string{"DEBUG onSubscribe", "DEBUG onNext value=1", "DEBUG onComplete", "DEBUG onSubscribe", "DEBUG onNext value=1", "DEBUG onComplete"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{level: c.level}
			if c.level == 0 {
				r.level = slog.LevelDebug
			}
			_, err := flux.Collect(t.Context(), c.build(slog.New(r)))
			require.ErrorIs(t, err, c.err)
			if c.err == nil {
				require.NoError(t, err)
			}
			require.Equal(t, c.want, r.got())
		})
	}
}

// The attribute category is the one given, "flux" when empty; a nil
// logger is slog.Default().
func TestLogCategoryAndDefault(t *testing.T) {
	var b strings.Builder
	l := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	_, err := flux.Collect(t.Context(), flux.Just(1).Log(l, "orders.in").Log(l, ""))
	require.NoError(t, err)
	require.Contains(t, b.String(), "msg=onNext category=orders.in value=1")
	require.Contains(t, b.String(), "msg=onNext category=flux value=1")

	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	r := &recorder{level: slog.LevelDebug}
	slog.SetDefault(slog.New(r))
	_, err = flux.Collect(t.Context(), flux.Just(1).Log(nil, "x"))
	require.NoError(t, err)
	require.Equal(t, []string{"DEBUG onSubscribe", "DEBUG onNext value=1", "DEBUG onComplete"}, r.got())
}

// A panicking handler ends the flow with *PanicError, whatever goroutine
// logs: the subscribing one, an inner's of FlatMap, a worker of
// PublishOn; the goroutines survive and are joined.
func TestLogHandlerPanic(t *testing.T) {
	leakFree(t)
	s := newParallel(t, 2)
	flows := map[string]func(l *slog.Logger) flux.Flux[int]{
		"subscribing goroutine": func(l *slog.Logger) flux.Flux[int] { return flux.Just(1, 2).Log(l, "x") },
		"FlatMap inner": func(l *slog.Logger) flux.Flux[int] {
			return flux.FlatMap(flux.Just(1, 2), func(v int) flux.Flux[int] { return flux.Just(v).Log(l, "x") }, 2)
		},
		"after PublishOn": func(l *slog.Logger) flux.Flux[int] { return flux.Range(0, 100).PublishOn(s, 4).Log(l, "x") },
	}
	for name, build := range flows {
		t.Run(name, func(t *testing.T) {
			r := &recorder{level: slog.LevelDebug, boom: true}
			_, err := flux.Collect(t.Context(), build(slog.New(r)))
			var pe *flux.PanicError
			require.ErrorAs(t, err, &pe)
		})
	}
}

// Reactor's cases of checkpoint(description) and name() on errors
// (FluxOnAssemblyTest, CheckpointTest), translated: the error signal that
// passes names the place, errors.Is and errors.As still find the cause,
// and neither completions nor cancellations are touched.
func TestCheckpointAndName(t *testing.T) {
	leakFree(t)
	whole := func(gf flux.GroupedFlux[int]) flux.Flux[int] { return gf.Flux }
	cases := []struct {
		name string
		f    func() flux.Flux[int]
		is   error
		as   bool   // a *PanicError is found
		msg  string // the error's message starts with it
		want []string
	}{
		{name: "checkpoint on an error", f: func() flux.Flux[int] { return flux.Error[int](errBoom).Checkpoint("parse") },
			is: errBoom, msg: `flux: checkpoint "parse": boom`},
		{name: "name on an error", f: func() flux.Flux[int] { return flux.Error[int](errBoom).Name("orders") },
			is: errBoom, msg: `flux: "orders": boom`},
		{name: "checkpoints nest, nearest the subscriber outermost", f: func() flux.Flux[int] {
			return flux.Map(flux.Error[int](errBoom).Checkpoint("source"), double).Checkpoint("mapped")
		}, is: errBoom, msg: `flux: checkpoint "mapped": flux: checkpoint "source": boom`, want: []string{"mapped", "source"}},
		{name: "a panic of Map", f: func() flux.Flux[int] {
			return flux.Map(flux.Just(1), func(int) int { panic("map") }).Checkpoint("mapping")
		}, as: true, msg: `flux: checkpoint "mapping": `},
		{name: "a stall of GroupBy", f: func() flux.Flux[int] {
			g := flux.GroupBy(flux.Range(0, 100), func(v int) int { return v % 3 }, 3, flux.WithGroupBuffer(2), flux.WithStallBuffer(0))
			return flux.FlatMap(g, whole, 2).Name("grouping")
		}, is: flux.ErrStalled, msg: `flux: "grouping": `},
		{name: "a timeout", f: func() flux.Flux[int] { return never.Timeout(time.Second).Checkpoint("slow source") },
			is: flux.ErrTimeout, msg: `flux: checkpoint "slow source": `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, err := flux.Collect(t.Context(), c.f())
				require.Error(t, err)
				if c.is != nil {
					require.ErrorIs(t, err, c.is)
				}
				if c.as {
					var pe *flux.PanicError
					require.ErrorAs(t, err, &pe)
				}
				require.True(t, strings.HasPrefix(err.Error(), c.msg), "%q", err.Error())
				var ce *flux.CheckpointError
				require.ErrorAs(t, err, &ce)
				var sites []string
				for e := error(ce); errors.As(e, &ce); e = ce.Err {
					sites = append(sites, ce.Name+ce.Description)
				}
				if c.want != nil {
					require.Equal(t, c.want, sites)
				}
			})
		})
	}
	t.Run("completion and cancellation pass", func(t *testing.T) {
		got, err := flux.Collect(t.Context(), flux.Just(1, 2).Checkpoint("a").Name("b"))
		require.NoError(t, err)
		require.Equal(t, []int{1, 2}, got)
		got, err = flux.Collect(t.Context(), flux.Range(1, 10).Checkpoint("a").Take(2))
		require.NoError(t, err)
		require.Equal(t, []int{1, 2}, got)
		downstream := errors.New("downstream")
		err = flux.Range(1, 10).Name("n").Subscribe(t.Context(), func(int) error { return downstream })
		require.Same(t, downstream, err, "the downstream's own error comes back unwrapped")
	})
	t.Run("diagnostics keep SwitchMap's synchronous upstream", func(t *testing.T) {
		up := flux.Just(1, 2, 3).Log(slog.New(&recorder{level: slog.LevelError}), "x").Checkpoint("c").Name("n")
		got, err := flux.Collect(t.Context(), flux.SwitchMap(up, func(v int) flux.Flux[int] { return flux.Range(v, 3) }))
		require.NoError(t, err)
		require.Equal(t, []int{1, 2, 3, 2, 3, 4, 3, 4, 5}, got)
	})
}

func ExampleFlux_Log() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a stable output
			}
			return a
		},
	}))
	_, _ = flux.Collect(context.Background(), flux.Just(1, 2).Log(logger, "numbers"))
	// Output:
	// level=DEBUG msg=onSubscribe category=numbers
	// level=DEBUG msg=onNext category=numbers value=1
	// level=DEBUG msg=onNext category=numbers value=2
	// level=DEBUG msg=onComplete category=numbers
}

func ExampleFlux_Checkpoint() {
	errBadInput := errors.New("bad input")
	f := flux.Map(flux.Concat(flux.Just(1), flux.Error[int](errBadInput)).Checkpoint("reading orders"),
		func(v int) int { return v * 2 })
	_, err := flux.Collect(context.Background(), f)
	fmt.Println(err)
	fmt.Println(errors.Is(err, errBadInput))
	// Output:
	// flux: checkpoint "reading orders": bad input
	// true
}

func ExampleFlux_Name() {
	f := flux.Concat(flux.Just(1), flux.Error[int](errors.New("broker gone"))).Name("orders")
	_, err := flux.Collect(context.Background(), f)
	var ce *flux.CheckpointError
	fmt.Println(err, errors.As(err, &ce), ce.Name)
	// Output: flux: "orders": broker gone true orders
}
