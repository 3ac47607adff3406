package testkit_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/testkit"
)

// lazy is a slog.LogValuer: the capture keeps what it resolves to.
type lazy struct{}

func (lazy) LogValue() slog.Value { return slog.StringValue("resolved") }

// Records logged from many goroutines at once are all kept, each goroutine's
// in its order, with their attributes resolved; a logger's own attributes
// and groups are dropped.
func TestLogCaptureKeepsConcurrentRecords(t *testing.T) {
	const goroutines, each = 8, 100
	logs := &testkit.LogCapture{Level: slog.LevelDebug}
	log := slog.New(logs).With("dropped", true).WithGroup("g")
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				log.Debug("line", "g", g, "i", i, "v", lazy{})
			}
		})
	}
	wg.Wait()
	recs := logs.Records(nil)
	require.Len(t, recs, goroutines*each)
	next := map[int64]int64{}
	for _, r := range recs {
		g, i := r.Attrs["g"].(int64), r.Attrs["i"].(int64)
		require.Equal(t, next[g], i, "goroutine %d's records in order", g)
		next[g]++
		require.Equal(t, map[string]any{"g": g, "i": i, "v": "resolved"}, r.Attrs)
	}
	require.Len(t, logs.Records(func(r testkit.LogRecord) bool { return r.Attrs["g"] == int64(0) }), each)
}

// A LogGoexit ends only the first goroutine that logs its message; a
// LogPanic panics on every record of its prefix and drops the rest.
func TestLogFaultsOnTheirMessage(t *testing.T) {
	goexit := &testkit.LogGoexit{Message: "m"}
	var reached []bool
	for range 2 {
		var wg sync.WaitGroup
		end := false
		wg.Go(func() {
			log := slog.New(goexit)
			log.Info("other")
			log.Info("m")
			end = true
		})
		wg.Wait()
		reached = append(reached, end)
	}
	require.Equal(t, []bool{false, true}, reached, "the first goroutine ended at its record, the second went on")
	require.True(t, goexit.Exited())
	p := slog.New(&testkit.LogPanic{Prefix: "lapsed"})
	require.NotPanics(t, func() { p.Info("renewed") })
	for range 2 {
		require.PanicsWithValue(t, "log handler: lapsed now", func() { p.Warn("lapsed now") })
	}
}
