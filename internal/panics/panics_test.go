package panics_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aggflow/aggflow/internal/panics"
	"github.com/stretchr/testify/assert"
)

func recovered(v any) (err *panics.Error) {
	defer func() { err = panics.New(recover()) }()
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
	var pe *panics.Error
	assert.True(t, errors.As(error(err), &pe))
}
