package dispatch_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
)

// A Mailbox serves one subscription at a time: a second one while the first
// runs fails at once with ErrSubscribed instead of waiting for a wake-up
// that Close gives only once, and Close ends the first. A subscription made
// after the first ended is served.
func TestMailboxOneSubscriptionAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		box := dispatch.NewMailbox[int]()
		first := make(chan error, 1)
		go func() {
			_, err := flux.Collect(t.Context(), box.Flux())
			first <- err
		}()
		synctest.Wait() // the first subscription waits for a push
		_, err := flux.Collect(t.Context(), box.Flux())
		require.ErrorIs(t, err, dispatch.ErrSubscribed)
		require.NoError(t, box.Push(1))
		box.Close()
		require.NoError(t, <-first)
		xs, err := flux.Collect(t.Context(), box.Flux())
		require.NoError(t, err)
		require.Empty(t, xs)
	})
}
