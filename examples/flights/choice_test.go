package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChoice: a choice flag takes each of its names, shows the one set, and
// refuses anything else with the names it wants.
func TestChoice(t *testing.T) {
	var m progressMode
	progress := choice[progressMode]{&m, progressModes}
	assert.Equal(t, "auto", progress.String())
	for _, name := range []string{"always", "never", "auto"} {
		require.NoError(t, progress.Set(name))
		assert.Equal(t, name, progress.String())
	}
	assert.EqualError(t, progress.Set("sometimes"), `want auto, always or never, not "sometimes"`)
	assert.Equal(t, progressAuto, m, "a refused name changes nothing")

	var k sourceKind
	source := choice[sourceKind]{&k, sourceKinds}
	require.NoError(t, source.Set("rxgo"))
	assert.Equal(t, sourceRxgo, k)
	assert.EqualError(t, source.Set("kafka"), `want flux, rxgo or jetstream, not "kafka"`)
	assert.Empty(t, choice[sourceKind]{}.String(), "the zero value flag.PrintDefaults makes")
}
