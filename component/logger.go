package component

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
)

// GuardLogger returns l with its handler guarded, since a log handler is
// user code: a panic in it must cost the line it was writing, never the
// goroutine logging (a scheduler's, a handler's), nor, through a recovery
// that logs the panic again with the same handler, the process. A panic of
// Enabled, Handle, WithAttrs or WithGroup is recovered and the record
// dropped (Enabled then says false). The first panic of a guarded logger is written to standard
// error, with the value, since the logger cannot say it; the others are
// counted only. A logger guarded already is returned as it is; nil stays
// nil. Cost per line: one deferred recover.
func GuardLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return nil
	}
	if _, ok := l.Handler().(guarded); ok {
		return l
	}
	return slog.New(guarded{h: l.Handler(), panics: new(atomic.Int64)})
}

// guarded is a handler that recovers its inner handler's panics.
type guarded struct {
	h      slog.Handler
	panics *atomic.Int64 // shared by the handlers derived from one Guard
}

// caught reports a recovered panic v of the inner handler.
func (g guarded) caught(v any) {
	if g.panics.Add(1) == 1 {
		fmt.Fprintf(os.Stderr, "aggflow: a log handler panicked, its record is dropped (and those of later panics): %v\n", v)
	}
}

func (g guarded) Enabled(ctx context.Context, level slog.Level) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			g.caught(v)
			ok = false
		}
	}()
	return g.h.Enabled(ctx, level)
}

func (g guarded) Handle(ctx context.Context, r slog.Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			g.caught(v)
			err = fmt.Errorf("component: log handler panicked: %v", v)
		}
	}()
	return g.h.Handle(ctx, r)
}

func (g guarded) WithAttrs(attrs []slog.Attr) slog.Handler {
	return g.derive(func() slog.Handler { return g.h.WithAttrs(attrs) })
}

func (g guarded) WithGroup(name string) slog.Handler {
	return g.derive(func() slog.Handler { return g.h.WithGroup(name) })
}

// derive guards the handler f derives; one whose derivation panicked keeps
// the inner handler as it was.
func (g guarded) derive(f func() slog.Handler) (h slog.Handler) {
	defer func() {
		if v := recover(); v != nil {
			g.caught(v)
			h = g
		}
	}()
	return guarded{h: f(), panics: g.panics}
}

// LoggerPanics returns how many panics of l's handler were recovered, 0
// for a logger GuardLogger did not return.
func LoggerPanics(l *slog.Logger) int64 {
	if g, ok := l.Handler().(guarded); ok {
		return g.panics.Load()
	}
	return 0
}
