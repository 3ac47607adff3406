package partition_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/partition"
)

// capture is a slog.Handler that keeps the records at or above its level.
type capture struct {
	level slog.Level
	mu    sync.Mutex
	recs  []logLine
}

// logLine is one captured record.
type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

func (c *capture) Enabled(_ context.Context, l slog.Level) bool { return l >= c.level }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	line := logLine{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool {
		line.attrs[a.Key] = a.Value.Resolve().Any()
		return true
	})
	c.mu.Lock()
	c.recs = append(c.recs, line)
	c.mu.Unlock()
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

// lines returns the records of level level.
func (c *capture) lines(level slog.Level) []logLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []logLine
	for _, l := range c.recs {
		if l.level == level {
			out = append(out, l)
		}
	}
	return out
}

// A failing handler under the default policy is settled with a WARN line
// that names the partition, the position, the aggregate, the attempt and
// the error, seen at the default level (Info); a partition logs at most one
// line a second, the next saying how many were folded into it.
func TestFailureSettledWarnsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &capture{level: slog.LevelInfo}
		d, err := partition.NewDispatcher("accounts", accounts, newParallel(t, 2), func(x op) string { return x.id },
			func(_ context.Context, x partition.Delivery[op]) error {
				return fmt.Errorf("refused %s", x.Exchange.id)
			}, partition.WithLogger(slog.New(logs)))
		require.NoError(t, err)
		p0, err := d.Assign(t.Context(), 0, 1)
		require.NoError(t, err)
		p1, err := d.Assign(t.Context(), 1, 1)
		require.NoError(t, err)
		for i := range 5 {
			require.NoError(t, p0.Deliver(t.Context(), op{fmt.Sprint("a", i), 0}, int64(i+1), 1))
		}
		require.NoError(t, p1.Deliver(t.Context(), op{"b", 0}, 7, 2))
		synctest.Wait()
		warns := logs.lines(slog.LevelWarn)
		require.Len(t, warns, 2, "one line per partition: %v", warns)
		byPartition := map[int64]logLine{}
		for _, w := range warns {
			byPartition[w.attrs["partition"].(int64)] = w
		}
		w := byPartition[0]
		pos := w.attrs["position"].(int64)
		require.Equal(t, fmt.Sprint("a", pos-1), w.attrs["aggregate_id"])
		require.Equal(t, int64(1), w.attrs["attempt"])
		require.EqualError(t, w.attrs["error"].(error), fmt.Sprint("refused a", pos-1))
		require.NotContains(t, w.attrs, "folded")
		require.Equal(t, logLine{level: slog.LevelWarn, msg: w.msg, attrs: map[string]any{"dispatcher": "accounts",
			"partition": int64(1), "position": int64(7), "aggregate_id": "b", "attempt": int64(2),
			"error": byPartition[1].attrs["error"]}}, byPartition[1])

		time.Sleep(time.Second) // virtual: the interval passes
		require.NoError(t, p0.Deliver(t.Context(), op{"c", 0}, 9, 1))
		synctest.Wait()
		warns = logs.lines(slog.LevelWarn)
		require.Len(t, warns, 3)
		require.Equal(t, int64(9), warns[2].attrs["position"])
		require.Equal(t, int64(4), warns[2].attrs["folded"], "the four lines of partition 0 not logged")
		_, err = d.Close(t.Context())
		require.NoError(t, err)
	})
}
