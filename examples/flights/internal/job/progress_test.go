package job

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
		stop := drawProgress(&out, Bar{Description: "dispatching", Total: 200_000, Unit: "exchanges"}, done.Load)
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

// TestProgressOnlyOnTerminal: under auto, a file that is not a terminal
// gets no bar, but one line saying what is under way when the work is worth
// a bar (it may take seconds, with nothing else printed); nothing under
// never.
func TestProgressOnlyOnTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer f.Close()
	var buf bytes.Buffer
	large := Bar{Description: "decoding", Total: 3_000_000, Worth: 1, Unit: "bytes"}
	small := Bar{Description: "dispatching", Total: 3, Worth: 100, Unit: "exchanges"}
	for _, w := range []io.Writer{f, &buf} {
		for _, mode := range []ProgressMode{ProgressAuto, ProgressNever} {
			for _, b := range []Bar{large, small} {
				stop := StartProgress(w, mode, b, func() int64 { return 1 })
				stop(true)
			}
		}
	}
	written, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	assert.Equal(t, "flights: decoding 3.0 MB\n", string(written))
	assert.Equal(t, "flights: decoding 3.0 MB\n", buf.String())
}

// TestProgressAlways: always draws on any writer, even for small work, in
// bytes or in the unit counted.
func TestProgressAlways(t *testing.T) {
	for _, tc := range []struct {
		b    Bar
		want string
	}{
		{Bar{Description: "decoding", Total: 5 << 20, Worth: 1 << 30, Unit: "bytes"}, "MB"},
		{Bar{Description: "dispatching", Total: 3, Worth: 100, Unit: "exchanges"}, "0/3"},
	} {
		var buf bytes.Buffer
		stop := StartProgress(&buf, ProgressAlways, tc.b, func() int64 { return 1 })
		stop(false)
		assert.Contains(t, buf.String(), tc.b.Description)
		assert.Contains(t, buf.String(), tc.want)
	}
}
