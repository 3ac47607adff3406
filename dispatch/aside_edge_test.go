package dispatch_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/testkit"
)

// edgeAsideChild names the test the child process runs.
const edgeAsideChild = "AGGFLOW_BRK_ASIDE_CHILD"

// A discard hook that panics (or calls runtime.Goexit), logged by a log handler that panics too: the
// discarding goes on, the exchange is counted once, the dispatcher reaches
// its end and the process lives. The hooks of a discarded exchange run on a
// goroutine of their own, where nothing recovered the log handler's panic:
// the process crashed. The scenario runs in a child process so that a crash
// fails this test rather than the test binary.
func TestDiscardHookWithPanickingLogDoesNotCrash(t *testing.T) {
	if how := os.Getenv(edgeAsideChild); how != "" {
		edgeAsideScenario(t, how)
		return
	}
	for _, how := range []string{"panic", "Goexit"} {
		t.Run(how, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestDiscardHookWithPanickingLogDoesNotCrash$", "-test.count=1")
			cmd.Env = append(os.Environ(), edgeAsideChild+"="+how)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "child process:\n%s", out)
		})
	}
}

func edgeAsideScenario(t *testing.T, how string) {
	release := make(chan struct{})
	started := make(chan struct{})
	d, err := dispatch.New[testkit.Exchange]("orders", orders, nil,
		func(ctx context.Context, x testkit.Exchange) error {
			if x.Seq == 0 {
				close(started)
				<-release
			}
			return nil
		},
		dispatch.WithParallelism(2), dispatch.WithScheduler(newParallel(t, 1)),
		dispatch.WithLogger(slog.New(panicOnMsg{"dispatch: hook panicked"})),
		dispatch.WithDiscardHook(func(testkit.Exchange, error) {
			if how == "Goexit" {
				runtime.Goexit()
			}
			panic("discard hook")
		}))
	require.NoError(t, err)
	require.NoError(t, d.Prepare(t.Context()))
	require.NoError(t, d.Start())
	// "a" is group 1 and "b" group 0 of 2: b's exchange waits for the one
	// scheduler goroutine, which a's handler holds, and ForceStop discards it.
	require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, "a"), Seq: 0}))
	<-started
	require.NoError(t, d.Emit(t.Context(), testkit.Exchange{ID: aggregate.NewID(orders, "b"), Seq: 1}))
	d.ForceStop()
	close(release)
	<-d.Done()
	st := d.Stats()
	require.Equal(t, st.Received, st.Succeeded+st.Failed+st.Discarded, "%+v", st)
	require.Equal(t, dispatch.Stats{Received: 2, Succeeded: st.Succeeded, Failed: st.Failed, Discarded: 1}, st)
}
