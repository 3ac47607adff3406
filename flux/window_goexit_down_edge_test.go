package flux_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/flux"
)

// A subscriber of Window whose onNext (given a window) calls
// runtime.Goexit leaves as one whose onNext failed does: the upstream,
// endless here, is cancelled and the router goroutine joined, as RefCount
// and the sinks do for a subscriber that exits.
func TestWindowSubscriberGoexitCancelsTheUpstream(t *testing.T) {
	leakFree(t)
	upstream := make(chan struct{})
	endless := flux.Create(func(ctx context.Context, sink flux.Sink[int]) error {
		defer close(upstream)
		for i := 0; ; i++ {
			if err := sink.Next(i); err != nil {
				return err
			}
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = flux.Window(endless, 2).Subscribe(context.Background(), func(flux.Flux[int]) error { runtime.Goexit(); return nil })
	}()
	<-done
	<-upstream // hangs (the test's timeout) while the upstream runs on
	require.True(t, true)
}
