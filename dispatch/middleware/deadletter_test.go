package middleware_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch/middleware"
)

var errDLQDown = errors.New("dead-letter queue down")

func TestDeadLetterTakesTheFailure(t *testing.T) {
	var got []error
	h := deadLetter(t, func(_ context.Context, j job, err error) error {
		require.Equal(t, 3, j.seq)
		got = append(got, err)
		return nil
	})(func(context.Context, job) error { return errTransient })
	require.NoError(t, h(t.Context(), job{seq: 3}), "a dead-lettered exchange is handled")
	require.Equal(t, []error{errTransient}, got)
}

func TestDeadLetterNotCalledOnSuccess(t *testing.T) {
	called := false
	h := deadLetter(t, func(context.Context, job, error) error { called = true; return nil })(
		func(context.Context, job) error { return nil })
	require.NoError(t, h(t.Context(), job{}))
	require.False(t, called)
}

func TestDeadLetterHookFailureJoinsBoth(t *testing.T) {
	h := deadLetter(t, func(context.Context, job, error) error { return errDLQDown })(
		func(context.Context, job) error { return errTransient })
	err := h(t.Context(), job{})
	require.ErrorIs(t, err, errTransient)
	require.ErrorIs(t, err, errDLQDown)
	require.ErrorIs(t, err, middleware.ErrDeadLetter)
	require.EqualError(t, err, "transient failure\nmiddleware: dead letter hook failed: dead-letter queue down")
}

func TestDeadLetterSkipsOnceTheContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	called := false
	h := deadLetter(t, func(context.Context, job, error) error { called = true; return nil })(
		func(context.Context, job) error { cancel(); return errTransient })
	require.Same(t, errTransient, h(ctx, job{}))
	require.False(t, called)
}

func TestDeadLetterHookPanicIsTheHandlers(t *testing.T) {
	h := deadLetter(t, func(context.Context, job, error) error { panic("hook") })(
		func(context.Context, job) error { return errTransient })
	require.PanicsWithValue(t, "hook", func() { _ = h(t.Context(), job{}) })
}

func TestDeadLetterNilHook(t *testing.T) {
	mw, err := middleware.DeadLetter[job](nil)
	require.Nil(t, mw)
	require.ErrorIs(t, err, middleware.ErrInvalidOption)
	require.EqualError(t, err, "middleware: invalid option: DeadLetter: nil hook")
}
