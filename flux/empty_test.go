package flux_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
	"github.com/stretchr/testify/require"
)

func TestDefaultIfEmpty(t *testing.T) {
	testkit.Verify(t, flux.Empty[int]().DefaultIfEmpty(7)).ExpectNext(7).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Just(1, 2).DefaultIfEmpty(7)).ExpectNext(1, 2).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Error[int](errBoom).DefaultIfEmpty(7)).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, endless.DefaultIfEmpty(7).Take(2)).ExpectNext(0, 1).ExpectComplete().VerifyT()
	// An empty upstream stopped by the end of ctx is not empty: it is cancelled.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := flux.Collect(ctx, never.DefaultIfEmpty(7))
	require.ErrorIs(t, err, context.Canceled)
}

func TestSwitchIfEmpty(t *testing.T) {
	subscribed := 0
	other := flux.Defer(func() flux.Flux[int] { subscribed++; return flux.Just(8, 9) })
	testkit.Verify(t, flux.Empty[int]().SwitchIfEmpty(other)).ExpectNext(8, 9).ExpectComplete().VerifyT()
	require.Equal(t, 1, subscribed)
	testkit.Verify(t, flux.Just(1).SwitchIfEmpty(other)).ExpectNext(1).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Error[int](errBoom).SwitchIfEmpty(other)).ExpectErrorIs(errBoom).VerifyT()
	require.Equal(t, 1, subscribed, "other is subscribed only for an empty completion")
	testkit.Verify(t, flux.Empty[int]().SwitchIfEmpty(failing)).ExpectNextCount(10).ExpectErrorIs(errBoom).VerifyT()
	testkit.Verify(t, flux.Empty[int]().SwitchIfEmpty(endless).Take(3)).ExpectNext(0, 1, 2).ExpectComplete().VerifyT()
	testkit.Verify(t, flux.Empty[int]().SwitchIfEmpty(flux.Empty[int]())).ExpectComplete().VerifyT()
}

func ExampleFlux_DefaultIfEmpty() {
	got, err := flux.Collect(context.Background(), flux.Just(1, 2, 3).Filter(func(v int) bool { return v > 5 }).DefaultIfEmpty(-1))
	fmt.Println(got, err)
	// Output: [-1] <nil>
}

func ExampleFlux_SwitchIfEmpty() {
	cached := flux.Empty[string]()
	got, err := flux.Collect(context.Background(), cached.SwitchIfEmpty(flux.Just("fetched")))
	fmt.Println(got, err)
	// Output: [fetched] <nil>
}
