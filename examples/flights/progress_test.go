package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProgressRedraws: the bar follows the count every progressEvery and
// stops drawing, its goroutine gone, once stopped.
func TestProgressRedraws(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		var done atomic.Int64
		stop := drawProgress(&out, 200_000, done.Load)
		done.Store(50_000)
		time.Sleep(progressEvery + time.Millisecond)
		synctest.Wait()
		assert.Contains(t, out.String(), "50000/200000")
		done.Store(120_000)
		time.Sleep(progressEvery)
		synctest.Wait()
		assert.Contains(t, out.String(), "120000/200000")

		stop(false)
		drawn := out.Len()
		time.Sleep(10 * progressEvery)
		synctest.Wait()
		assert.Equal(t, drawn, out.Len(), "nothing drawn after stop")
	})
}

// TestProgressOnlyOnTerminal: a file that is not a terminal, or a small
// input, gets no bar.
func TestProgressOnlyOnTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer f.Close()
	var buf bytes.Buffer
	for _, w := range []io.Writer{f, &buf} {
		stop := startProgress(w, 3_000_000, func() int64 { return 1 })
		stop(true)
	}
	info, err := f.Stat()
	require.NoError(t, err)
	assert.Zero(t, info.Size())
	assert.Zero(t, buf.Len())
}
