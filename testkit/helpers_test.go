package testkit_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// subscribedTo counts the subscriptions of f in n.
func subscribedTo[T any](f flux.Flux[T], n *atomic.Int32) flux.Flux[T] {
	return flux.Defer(func() flux.Flux[T] { n.Add(1); return f })
}

// ticks emits 0, 1, ... n-1, each after a pause of every, then completes:
// on the virtual clock inside a synctest bubble.
func ticks(n int, every time.Duration) flux.Flux[int] {
	return flux.Create(func(ctx context.Context, s flux.Sink[int]) error {
		for i := range n {
			select {
			case <-time.After(every):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			if err := s.Next(i); err != nil {
				return err
			}
		}
		return nil
	})
}

// after ends with err (nil: completes) after d, without items.
func after(d time.Duration, err error) flux.Flux[int] {
	return flux.Create(func(ctx context.Context, _ flux.Sink[int]) error {
		select {
		case <-time.After(d):
			return err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
}

// never emits nothing and ends only with its context.
func never() flux.Flux[int] { return flux.FromChannel(make(chan int)) }

var signalIndex = regexp.MustCompile(`signal (\d+): `)

// tester is what the checks below need: a *testing.T or a *rapid.T.
type tester interface {
	require.TestingT
	Helper()
}

// failsAt requires err to be an expectation failure at signal index, whose
// message contains want.
func failsAt(t tester, err error, index int, want string) {
	t.Helper()
	require.ErrorIs(t, err, testkit.ErrExpectation)
	require.ErrorContains(t, err, want)
	m := signalIndex.FindStringSubmatch(err.Error())
	require.NotNil(t, m, "no signal index in %q", err)
	require.Equal(t, strconv.Itoa(index), m[1], err.Error())
}

// invalidScript requires err to name an invalid script with want.
func invalidScript(t tester, err error, want string) {
	t.Helper()
	require.ErrorIs(t, err, testkit.ErrInvalidScript)
	require.False(t, errors.Is(err, testkit.ErrExpectation))
	require.ErrorContains(t, err, want)
}
