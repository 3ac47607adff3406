package middleware_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/dispatch/middleware"
)

// trace returns a middleware that appends "name>" on the way in and
// "<name" on the way out.
func trace(log *[]string, name string) middleware.Middleware[job] {
	return func(h dispatch.Handler[job]) dispatch.Handler[job] {
		return func(ctx context.Context, j job) error {
			*log = append(*log, name+">")
			err := h(ctx, j)
			*log = append(*log, "<"+name)
			return err
		}
	}
}

func TestChainFirstListedIsOutermost(t *testing.T) {
	var log []string
	h := middleware.Chain(func(context.Context, job) error {
		log = append(log, "h")
		return errTransient
	}, trace(&log, "a"), trace(&log, "b"), trace(&log, "c"))
	require.ErrorIs(t, h(t.Context(), job{}), errTransient, "the handler's error comes out unchanged")
	require.Equal(t, []string{"a>", "b>", "c>", "h", "<c", "<b", "<a"}, log)
}

func TestChainWithoutMiddlewareIsTheHandler(t *testing.T) {
	calls := 0
	h := middleware.Chain(func(context.Context, job) error { calls++; return nil })
	require.NoError(t, h(t.Context(), job{}))
	require.Equal(t, 1, calls)
}

func TestChainRefusesNils(t *testing.T) {
	ok := func(context.Context, job) error { return nil }
	var log []string
	cases := map[string]struct {
		h    dispatch.Handler[job]
		mws  []middleware.Middleware[job]
		want string
	}{
		"nil handler":    {nil, nil, "middleware: invalid argument: Chain: nil handler"},
		"nil middleware": {ok, []middleware.Middleware[job]{trace(&log, "a"), nil}, "middleware: invalid argument: Chain: nil middleware at position 1"},
		"nil result": {ok, []middleware.Middleware[job]{func(dispatch.Handler[job]) dispatch.Handler[job] { return nil }},
			"middleware: invalid argument: Chain: middleware at position 0 returned a nil handler"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := middleware.Chain(c.h, c.mws...)
			require.NotNil(t, h)
			err := h(t.Context(), job{})
			require.ErrorIs(t, err, middleware.ErrInvalidArgument)
			require.EqualError(t, err, c.want)
		})
	}
	require.Empty(t, log, "a refused chain calls nothing")
}

// Each middleware of the package, given a nil handler, fails every call.
func TestMiddlewaresRefuseANilHandler(t *testing.T) {
	dl := deadLetter(t, func(context.Context, job, error) error { return nil })
	to := timeout(t, 1)
	for name, mw := range map[string]middleware.Middleware[job]{"Retry": retry(t), "Timeout": to, "DeadLetter": dl} {
		err := mw(nil)(t.Context(), job{})
		require.ErrorIs(t, err, middleware.ErrInvalidArgument, name)
		require.EqualError(t, err, "middleware: invalid argument: "+name+": nil handler")
	}
}
