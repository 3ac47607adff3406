package dispatch_test

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
	"github.com/aggflow/aggflow/testkit"
)

// panicOnMsg is a log handler that panics on records with message msg.
type panicOnMsg struct{ msg string }

func (l panicOnMsg) Enabled(context.Context, slog.Level) bool { return true }
func (l panicOnMsg) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l panicOnMsg) WithGroup(string) slog.Handler            { return l }
func (l panicOnMsg) Handle(_ context.Context, r slog.Record) error {
	if r.Message == l.msg {
		panic("log handler: " + r.Message)
	}
	return nil
}

// edgeStop stops d gracefully within a minute (of virtual time under
// synctest) and returns its Stats then; a stop that did not end in time is
// forced, and its error returned.
func edgeStop[T any](t *testing.T, d *dispatch.Dispatcher[T]) (dispatch.Stats, error) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := d.StopGracefully(ctx)
	st := d.Stats()
	if err != nil {
		d.ForceStop()
	}
	return st, err
}

// A handler that panics or calls runtime.Goexit, with a failure log whose
// handler panics too: the exchange is still accounted for once (Failed),
// the next one of its group is handled, and the stop reaches its end. On
// Goexit the exchange was popped but never counted: InFlight stayed 1 and
// the dispatcher never reached Done.
func TestHandlerEndWithPanickingFailureLog(t *testing.T) {
	for _, how := range []string{"panic", "Goexit"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s, err := schedulers.NewParallel("edge", 2, schedulers.WithLogger(discardLogger))
				require.NoError(t, err)
				defer s.Dispose()
				id := aggregate.NewID(orders, "a")
				d, err := dispatch.New[testkit.Exchange]("orders", orders, nil,
					func(ctx context.Context, x testkit.Exchange) error {
						if x.Seq == 0 {
							if how == "panic" {
								panic("handler")
							}
							runtime.Goexit()
						}
						return nil
					}, dispatch.WithScheduler(s),
					dispatch.WithLogger(slog.New(panicOnMsg{"dispatch: exchange failed"})))
				require.NoError(t, err)
				require.NoError(t, d.Prepare(t.Context()))
				require.NoError(t, d.Start())
				for seq := range 2 {
					require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: id, Seq: seq}))
				}
				st, err := edgeStop(t, d)
				require.NoError(t, err, "stats %+v", st)
				require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 1, Failed: 1}, st)
			})
		})
	}
}

// An exchange that cannot be routed (its AggregateID panics) fails alone,
// also when the failure log's handler panics: the panic costs the log line
// only (it used to reach Emit's caller), the exchange is counted as failed
// and the stop reaches its end. It used to stay in flight for ever.
func TestUnroutedWithPanickingFailureLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := dispatch.New[panickyID]("orders", orders, nil,
			func(context.Context, panickyID) error { return nil },
			dispatch.WithLogger(slog.New(panicOnMsg{"dispatch: exchange failed"})))
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		emit := func(x panickyID) (v any) {
			defer func() { v = recover() }()
			require.NoError(t, d.Emit(t.Context(), x))
			return nil
		}
		require.Nil(t, emit(panickyID{bad: true}), "the log handler's panic is the logger's")
		require.Nil(t, emit(panickyID{id: "a"}))
		st, err := edgeStop(t, d)
		require.NoError(t, err, "stats %+v", st)
		require.Equal(t, dispatch.Stats{Received: 2, Succeeded: 1, Failed: 1}, st)
	})
}

// Under StopOnError a failed exchange stops the dispatcher, also when the
// failure log's handler panics (the panic goes on up to the scheduler): the
// policy was applied after the log, so the dispatcher kept running.
func TestStopOnErrorWithPanickingFailureLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := schedulers.NewParallel("edge", 1, schedulers.WithLogger(discardLogger))
		require.NoError(t, err)
		defer s.Dispose()
		d, err := dispatch.New[testkit.Exchange]("orders", orders, nil,
			func(ctx context.Context, x testkit.Exchange) error { return testkit.ErrInjected },
			dispatch.WithScheduler(s), dispatch.WithErrorPolicy(dispatch.StopOnError),
			dispatch.WithLogger(slog.New(panicOnMsg{"dispatch: exchange failed"})))
		require.NoError(t, err)
		require.NoError(t, d.Prepare(t.Context()))
		require.NoError(t, d.Start())
		require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, "a")}))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		select {
		case <-d.Done():
		case <-ctx.Done():
			st := d.State()
			d.ForceStop()
			<-d.Done()
			t.Fatalf("the failure did not stop the dispatcher under StopOnError (state %v)", st)
		}
		require.ErrorIs(t, d.Err(), testkit.ErrInjected)
		require.Equal(t, dispatch.Stats{Received: 1, Failed: 1}, d.Stats())
	})
}
