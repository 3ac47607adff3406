package dispatch_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// A knob is an Option of every exchange type: the same value is applied by
// dispatchers of two types, with no type argument (an invalid one is refused
// by both).
func TestAKnobServesEveryExchangeType(t *testing.T) {
	for _, c := range []struct {
		knob dispatch.Knob
		err  error
	}{{dispatch.WithMaxPending(8), nil}, {dispatch.WithMaxPending(0), dispatch.ErrInvalidOption}} {
		_, err := dispatch.New("d", orders, flux.Empty[testkit.Exchange](), testkit.Perform, c.knob, quiet)
		require.ErrorIs(t, err, c.err)
		_, err = dispatch.NewKeyed("k", orders, flux.Empty[int](), func(int) int { return 0 },
			func(context.Context, int) error { return nil }, c.knob, quiet)
		require.ErrorIs(t, err, c.err)
	}
}

// A hook of another exchange type is a compile error; the same program with
// the hook of the dispatcher's type compiles, so the error is the type's.
func TestAHookOfAnotherTypeDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	build := func(tags string) (string, error) {
		out, err := exec.Command("go", "build", "-tags", tags, "-o", os.DevNull, "./testdata/typecheck").CombinedOutput()
		return string(out), err
	}
	out, err := build("")
	require.NoError(t, err, out)
	out, err = build("mismatch")
	require.Error(t, err)
	require.Contains(t, out, "type dispatch.Option[hooked] of dispatch.WithDiscardHook")
	require.Contains(t, out, "does not match inferred type dispatch.Option[order]")
}

// Only an explicit conversion gives a hook to a dispatcher of another type;
// the constructor refuses it, naming the option and the hook's type.
func TestAHookConvertedToAnotherTypeIsRefused(t *testing.T) {
	hook := dispatch.WithDiscardHook(func(int, error) {})
	_, err := dispatch.New("d", orders, flux.Empty[testkit.Exchange](), testkit.Perform,
		dispatch.Option[testkit.Exchange](hook), quiet)
	require.ErrorIs(t, err, dispatch.ErrInvalidOption)
	require.ErrorContains(t, err, "WithDiscardHook takes int exchanges")
}
