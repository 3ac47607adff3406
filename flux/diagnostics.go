package flux

import (
	"context"
	"log/slog"

	"github.com/aggflow/aggflow/component"
)

// LogOption configures Log.
type LogOption func(*logConfig)

type logConfig struct{ level slog.Level }

// WithLogLevel sets the level of Log's records (default slog.LevelDebug).
func WithLogLevel(level slog.Level) LogOption {
	return func(c *logConfig) { c.level = level }
}

// Log records each signal of f through logger, at slog.LevelDebug unless
// WithLogLevel says otherwise, with ctx the subscription's context. The
// records' messages are "onSubscribe" (before f is subscribed), "onNext"
// (attribute "value", before the item passes on), "onError" (attribute
// "error"), "onComplete" and "cancel" (attribute "cause": the downstream's
// error, the cause of ctx, or ErrCancelled after an early stop). Each has
// the attribute "category" (category, or "flux" if empty) and, inside a
// Name, "name". logger nil is slog.Default() at the subscription.
//
// Records are made on the goroutine that delivers the signal, so never
// concurrently for one subscription. The handler is user code: a panic in
// it (Enabled or Handle) ends the flow with *PanicError, joined to the
// error or cancellation it was recording; the goroutine survives.
//
// Costs per signal one call to the handler's Enabled, and when enabled a
// record (the item boxed in an slog.Value); per subscription a small
// allocation. Log does not change how f runs: over a synchronous flux it is
// one (see SwitchMap).
func (f Flux[T]) Log(logger *slog.Logger, category string, opts ...LogOption) Flux[T] {
	cfg := logConfig{level: slog.LevelDebug}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if category == "" {
		category = "flux"
	}
	return Flux[T]{sync: f.synchronous(), subscribe: func(ctx context.Context, emit func(T) error) error {
		l := &signalLog{ctx: ctx, logger: logger, level: cfg.level, category: category}
		if l.logger == nil {
			l.logger = slog.Default()
		}
		l.name, _ = ctx.Value(nameKey{}).(string)
		if err := l.record("onSubscribe", slog.Attr{}); err != nil {
			return err
		}
		sig, err := f.observe(ctx, func(v T) error {
			if err := recordNext(l, v); err != nil {
				return err
			}
			return emit(v)
		})
		switch sig {
		case SignalComplete:
			return l.record("onComplete", slog.Attr{})
		case SignalError:
			return errorsJoin(err, l.record("onError", slog.Any("error", err)))
		}
		return errorsJoin(err, l.record("cancel", slog.Any("cause", reasonOf(err))))
	}}
}

// signalLog is one subscription's Log.
type signalLog struct {
	ctx      context.Context
	logger   *slog.Logger
	level    slog.Level
	category string
	name     string // of the enclosing Name, if any
}

// record logs msg with attr (if it has a key) under the guard of the
// handler's panics.
func (l *signalLog) record(msg string, attr slog.Attr) (err error) {
	defer component.Catch(&err)
	if !l.logger.Enabled(l.ctx, l.level) {
		return nil
	}
	l.write(msg, attr)
	return nil
}

// write makes the record of an enabled level.
func (l *signalLog) write(msg string, attr slog.Attr) {
	attrs := make([]slog.Attr, 0, 3)
	attrs = append(attrs, slog.String("category", l.category))
	if l.name != "" {
		attrs = append(attrs, slog.String("name", l.name))
	}
	if attr.Key != "" {
		attrs = append(attrs, attr)
	}
	l.logger.LogAttrs(l.ctx, l.level, msg, attrs...)
}

// recordNext logs the item v; it is boxed only when the level is enabled.
func recordNext[T any](l *signalLog, v T) (err error) {
	defer component.Catch(&err)
	if !l.logger.Enabled(l.ctx, l.level) {
		return nil
	}
	l.write("onNext", slog.Any("value", v))
	return nil
}

// nameKey is the context key of the name Name gives the operators
// upstream of it.
type nameKey struct{}

// CheckpointError is an error signal that passed a Checkpoint or a Name
// on its way downstream: Err is the error as it arrived, Description the
// checkpoint's (empty for a Name) and Name the name (empty for a
// Checkpoint). errors.Is and errors.As see through it to Err, so
// ErrStalled, ErrTimeout or a *PanicError are still found; each Checkpoint
// or Name passed adds one, the outermost being the one nearest the
// subscriber.
type CheckpointError struct {
	Name        string
	Description string
	Err         error
}

// Error returns `flux: checkpoint "description": err` or
// `flux: "name": err`.
func (e *CheckpointError) Error() string {
	if e.Name != "" {
		return "flux: " + quote(e.Name) + ": " + e.Err.Error()
	}
	return "flux: checkpoint " + quote(e.Description) + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *CheckpointError) Unwrap() error { return e.Err }

func quote(s string) string { return `"` + s + `"` }

// Checkpoint marks the place in the chain: an error signal of f passing it
// (f's own, an operator's such as ErrStalled or a Timeout, a panic of a
// user function) reaches the downstream as a *CheckpointError with
// description, so the error says which part of a pipeline produced it.
// Cancellations and completions pass as they are. Costs one function call
// per item, nothing allocated per item, one allocation per error signal.
// Checkpoint does not change how f runs: over a synchronous flux it is one
// (see SwitchMap).
func (f Flux[T]) Checkpoint(description string) Flux[T] {
	return f.checkpoint(&CheckpointError{Description: description}, "")
}

// Name names f: its error signals reach the downstream as a
// *CheckpointError with name, as Checkpoint's do, and the records of the
// Log operators within f carry the attribute "name" (the nearest Name
// downstream of a Log wins). Costs Checkpoint's, and a context value per
// subscription.
func (f Flux[T]) Name(name string) Flux[T] {
	return f.checkpoint(&CheckpointError{Name: name}, name)
}

// checkpoint wraps the error signals of f in copies of site; name, if not
// empty, is given to the Log operators upstream.
func (f Flux[T]) checkpoint(site *CheckpointError, name string) Flux[T] {
	return Flux[T]{sync: f.synchronous(), subscribe: func(ctx context.Context, emit func(T) error) error {
		if name != "" {
			ctx = context.WithValue(ctx, nameKey{}, name)
		}
		sig, err := f.observe(ctx, emit)
		if sig != SignalError {
			return err
		}
		e := *site
		e.Err = err
		return &e
	}}
}
