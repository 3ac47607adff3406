package component_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/aggflow/aggflow/component"
)

// faulty panics in the methods named in panicIn, else writes to text.
type faulty struct {
	panicIn map[string]bool
	inner   slog.Handler
}

func (f faulty) maybe(m string) {
	if f.panicIn[m] {
		panic(m)
	}
}
func (f faulty) Enabled(ctx context.Context, l slog.Level) bool {
	f.maybe("Enabled")
	return f.inner.Enabled(ctx, l)
}
func (f faulty) Handle(ctx context.Context, r slog.Record) error {
	f.maybe("Handle")
	return f.inner.Handle(ctx, r)
}
func (f faulty) WithAttrs(as []slog.Attr) slog.Handler {
	f.maybe("WithAttrs")
	return faulty{f.panicIn, f.inner.WithAttrs(as)}
}
func (f faulty) WithGroup(g string) slog.Handler {
	f.maybe("WithGroup")
	return faulty{f.panicIn, f.inner.WithGroup(g)}
}

func TestGuardDropsWhatPanicsAndKeepsTheRest(t *testing.T) {
	for _, m := range []string{"Enabled", "Handle", "WithAttrs", "WithGroup"} {
		t.Run(m, func(t *testing.T) {
			var out bytes.Buffer
			l := component.GuardLogger(slog.New(faulty{map[string]bool{m: true}, slog.NewTextHandler(&out, nil)}))
			assert.NotPanics(t, func() {
				l.With("k", "v").WithGroup("g").Info("first")
				l.Info("second")
			})
			assert.Positive(t, component.LoggerPanics(l))
			switch m {
			case "WithAttrs", "WithGroup": // the derivation is skipped, the lines kept
				assert.Contains(t, out.String(), "first")
				assert.Contains(t, out.String(), "second")
			default:
				assert.Empty(t, out.String())
			}
		})
	}
}

func TestGuardIsIdempotentAndTransparent(t *testing.T) {
	var out bytes.Buffer
	l := component.GuardLogger(slog.New(slog.NewTextHandler(&out, nil)))
	assert.Same(t, l, component.GuardLogger(l))
	assert.Nil(t, component.GuardLogger(nil))
	l.With("a", 1).WithGroup("g").Info("line", "b", 2)
	assert.Contains(t, out.String(), `msg=line a=1 g.b=2`)
	assert.Zero(t, component.LoggerPanics(l))
	assert.Zero(t, component.LoggerPanics(slog.Default()))
}
