package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// Run forces what a graceful stop left once its timeout passed, and returns
// only once every handler returned (Done): a handler that finishes its
// cancelled work late is accounted for, its outcome hook called, before Run
// returns, so that InFlight is 0 and no hook runs after it.
func TestRunReturnsAfterTheForcedHandlersReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var hooked atomic.Int64
		ctx, cancel := context.WithCancel(t.Context())
		d, err := dispatch.New("orders", orders, oneThenWait(),
			func(context.Context, testkit.Exchange) error { <-release; return nil }, // ignores its ctx
			quietOf[testkit.Exchange](), dispatch.WithStopTimeout(time.Second),
			dispatch.WithOutcomeHook(func(context.Context, dispatch.Result[testkit.Exchange]) { hooked.Add(1) }))
		require.NoError(t, err)
		ran := make(chan error, 1)
		go func() { ran <- d.Run(ctx) }()
		synctest.Wait() // the handler runs
		cancel()
		time.Sleep(1500 * time.Millisecond) // past the stop timeout: the force came, the handler goes on
		synctest.Wait()
		select {
		case err := <-ran:
			close(release)
			<-d.Done()
			t.Fatalf("Run returned (%v) while a handler still ran: %+v, %d hooks", err, d.Stats(), hooked.Load())
		default:
		}
		close(release)
		err = <-ran
		assert.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		assert.Zero(t, d.Stats().InFlight)
		assert.Equal(t, int64(1), hooked.Load(), "the outcome hook ran before Run returned")
		assert.True(t, testkit.Closed(d.Done()))
	})
}

// A handler that never returns, even forced, bounds Run by a second
// timeout after the force: Run returns an error naming what still runs.
func TestRunGivesUpOnAHandlerThatNeverReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		ctx, cancel := context.WithCancel(t.Context())
		d, err := dispatch.New("orders", orders, oneThenWait(),
			func(context.Context, testkit.Exchange) error { <-release; return nil },
			quietOf[testkit.Exchange](), dispatch.WithStopTimeout(time.Second))
		require.NoError(t, err)
		ran := make(chan error, 1)
		go func() { ran <- d.Run(ctx) }()
		synctest.Wait()
		cancel()
		start := time.Now()
		err = <-ran
		assert.Equal(t, 2*time.Second, time.Since(start), "the stop timeout, then as long again for the forced handlers")
		assert.ErrorIs(t, err, dispatch.ErrShutdownTimeout)
		assert.ErrorContains(t, err, "1 in flight")
		assert.False(t, testkit.Closed(d.Done()))
	})
}

// oneThenWait emits one exchange, then waits for the end of the flow.
func oneThenWait() flux.Flux[testkit.Exchange] {
	return flux.Create(func(ctx context.Context, sink flux.Sink[testkit.Exchange]) error {
		if err := sink.Next(exchanges(1, 1)[0]); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	})
}

// panickingLog is a slog handler that panics on every record: user code
// too, which must not end the process nor a shared goroutine.
type panickingLog struct{}

func (panickingLog) Enabled(context.Context, slog.Level) bool  { return true }
func (panickingLog) Handle(context.Context, slog.Record) error { panic("log handler") }
func (h panickingLog) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h panickingLog) WithGroup(string) slog.Handler           { return h }

// A logger whose handler panics costs its lines, nothing else: the failed
// and the panicking exchanges are accounted for and the run ends. Before,
// the failure's log panicked into the scheduler, whose recovery logged the
// panic with the same logger, which panicked again and ended the process.
func TestPanickingLoggerEndsNothing(t *testing.T) {
	xs := exchanges(3, 3)
	d, err := dispatch.New("orders", orders, flux.FromSlice(xs),
		func(_ context.Context, x testkit.Exchange) error {
			switch x.ID {
			case xs[0].ID:
				return errors.New("refused")
			case xs[1].ID:
				panic("handler")
			}
			return nil
		},
		dispatch.WithLogger(slog.New(panickingLog{})),
		dispatch.WithFailureLogLevel(slog.LevelError))
	require.NoError(t, err)
	require.NoError(t, d.Run(t.Context()))
	assert.Equal(t, dispatch.Stats{Received: 3, Succeeded: 1, Failed: 2}, d.Stats())
}
