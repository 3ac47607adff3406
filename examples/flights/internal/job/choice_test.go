package job

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChoice: a choice flag takes each of its names, shows the one set, and
// refuses anything else with the names it wants.
func TestChoice(t *testing.T) {
	var m ProgressMode
	progress := Choice[ProgressMode]{&m, progressModes}
	assert.Equal(t, "auto", progress.String())
	for _, name := range []string{"always", "never", "auto"} {
		require.NoError(t, progress.Set(name))
		assert.Equal(t, name, progress.String())
	}
	assert.EqualError(t, progress.Set("sometimes"), `want auto, always or never, not "sometimes"`)
	assert.Equal(t, ProgressAuto, m, "a refused name changes nothing")
	assert.Empty(t, Choice[ProgressMode]{}.String(), "the zero value flag.PrintDefaults makes")
}
