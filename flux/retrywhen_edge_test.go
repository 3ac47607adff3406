package flux_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
)

// An error that Filter rejects is the error signal as it is, the same
// value, on the last attempt as on any earlier one (backoff.Retry returns
// its Permanent wrapper when the tries have run out).
func TestRetryWhenRejectedErrorAsItIs(t *testing.T) {
	errFatal := errors.New("fatal")
	for attempts := range 3 {
		for failed := range attempts + 1 {
			subs := 0
			f := flux.Defer(func() flux.Flux[int] {
				subs++
				if subs <= failed {
					return flux.Error[int](errBoom)
				}
				return flux.Error[int](errFatal)
			})
			spec := flux.RetrySpec{MaxAttempts: attempts, Filter: func(err error) bool { return err == errBoom }}
			err := f.RetryWhen(spec).Subscribe(context.Background(), func(int) error { return nil })
			require.Truef(t, err == errFatal, "attempts %d, failed %d: got %T %v", attempts, failed, err, err)
			require.Equal(t, failed+1, subs)
		}
	}
}

// The downstream's error on the last attempt is returned as it is too.
func TestRetryWhenDownstreamErrorAsItIs(t *testing.T) {
	errStop := errors.New("stop")
	err := flux.Just(1).RetryWhen(flux.RetryMax(0)).Subscribe(context.Background(), func(int) error { return errStop })
	require.Truef(t, err == errStop, "got %T %v", err, err)
}
