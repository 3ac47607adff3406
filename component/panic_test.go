package component_test

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/component"
)

func recovered(v any) (err *component.PanicError) {
	defer func() { err = component.NewPanicError(recover()) }()
	panic(v)
}

func TestErrorCarriesValueAndStack(t *testing.T) {
	err := recovered("boom")
	assert.Equal(t, "boom", err.Value)
	assert.Equal(t, "panic: boom", err.Error())
	assert.True(t, strings.Contains(string(err.Stack), "recovered"), "stack names the panicking function")
	assert.Nil(t, err.Unwrap())
}

func TestUnwrapSeesErrorValues(t *testing.T) {
	err := recovered(io.EOF)
	assert.ErrorIs(t, err, io.EOF)
	var pe *component.PanicError
	assert.True(t, errors.As(error(err), &pe))
}

func TestAsideReportsHowFEnded(t *testing.T) {
	ran := false
	p, exited := component.Aside(func() { ran = true })
	assert.True(t, ran)
	assert.Nil(t, p)
	assert.False(t, exited)

	p, exited = component.Aside(func() { panic("boom") })
	require.NotNil(t, p)
	assert.Equal(t, "boom", p.Value)
	assert.True(t, strings.Contains(string(p.Stack), "TestAsideReportsHowFEnded"), "the panicking stack")
	assert.False(t, exited)

	after := false
	p, exited = component.Aside(func() {
		defer func() { after = true }() // deferred calls still run
		runtime.Goexit()
	})
	assert.Nil(t, p)
	assert.True(t, exited, "the caller's goroutine goes on")
	assert.True(t, after)
}
