package testkit

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
)

// LogRecord is one record a LogCapture kept: its level, its message and its
// attributes by key, each value resolved (slog.Value.Resolve, then Any: an
// int is an int64, an error stays an error). Attributes added by WithAttrs
// and groups are not kept.
type LogRecord struct {
	Level   slog.Level
	Message string
	Attrs   map[string]any
}

// LogCapture is a slog.Handler that keeps, in the order handled, the records
// at or above Level (the zero value: slog.LevelInfo and above); WithAttrs and
// WithGroup return the capture itself. Its methods are safe for concurrent
// use; a LogCapture must not be copied after first use.
type LogCapture struct {
	Level slog.Level

	mu   sync.Mutex
	recs []LogRecord
}

// Enabled reports whether l is at or above c.Level.
func (c *LogCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= c.Level }

// Handle keeps r. It never fails.
func (c *LogCapture) Handle(_ context.Context, r slog.Record) error {
	rec := LogRecord{Level: r.Level, Message: r.Message, Attrs: make(map[string]any, r.NumAttrs())}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve().Any()
		return true
	})
	c.mu.Lock()
	c.recs = append(c.recs, rec)
	c.mu.Unlock()
	return nil
}

// WithAttrs returns c: the attributes are dropped.
func (c *LogCapture) WithAttrs([]slog.Attr) slog.Handler { return c }

// WithGroup returns c: the group is dropped.
func (c *LogCapture) WithGroup(string) slog.Handler { return c }

// Records returns the records kept so far for which keep returns true (every
// record when keep is nil), in the order handled: a new slice, whose
// records' Attrs maps are shared with the capture (read them only). keep runs
// under the capture's lock: it must not log to c. Cost: one pass over the
// records kept.
func (c *LogCapture) Records(keep func(LogRecord) bool) []LogRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []LogRecord
	for _, r := range c.recs {
		if keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// LogGoexit is a slog.Handler that ends the goroutine logging with
// runtime.Goexit on the first record whose message is Message (as a test's
// t.FailNow in a log handler would), and drops every record. It stands in
// for a user's logger in tests of code that must survive its Goexit. Safe
// for concurrent use: of records of Message logged at once, one Goexits.
type LogGoexit struct {
	Message string

	exited atomic.Bool
}

// Enabled reports true: every record reaches Handle.
func (h *LogGoexit) Enabled(context.Context, slog.Level) bool { return true }

// Handle calls runtime.Goexit when r is the first record of h.Message, and
// returns nil otherwise.
func (h *LogGoexit) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.Message && h.exited.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
	return nil
}

// WithAttrs returns h.
func (h *LogGoexit) WithAttrs([]slog.Attr) slog.Handler { return h }

// WithGroup returns h.
func (h *LogGoexit) WithGroup(string) slog.Handler { return h }

// Exited reports whether Handle has called runtime.Goexit.
func (h *LogGoexit) Exited() bool { return h.exited.Load() }

// LogPanic is a slog.Handler that panics on every record whose message
// begins with Prefix (every record, with the empty Prefix), with the string
// "log handler: " and the message, and drops the others. It stands in for
// a user's logger in tests of code that must survive its panic. Safe for
// concurrent use.
type LogPanic struct {
	Prefix string
}

// Enabled reports true: every record reaches Handle.
func (p *LogPanic) Enabled(context.Context, slog.Level) bool { return true }

// Handle panics when r's message begins with p.Prefix, and returns nil
// otherwise.
func (p *LogPanic) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, p.Prefix) {
		panic("log handler: " + r.Message)
	}
	return nil
}

// WithAttrs returns p.
func (p *LogPanic) WithAttrs([]slog.Attr) slog.Handler { return p }

// WithGroup returns p.
func (p *LogPanic) WithGroup(string) slog.Handler { return p }
