package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
)

// FailurePolicy says what becomes of a delivery whose handler failed: it
// returned an error, or panicked (the panic is recovered into a
// *dispatch.PanicError and goes the same way). A handler that fails once a
// force (Revoke's deadline, Lose) cancelled its ctx has not failed: its
// position is discarded and delivered again, whatever the policy.
//
// The zero value settles at once: the position counts as finished, so the
// partition acknowledges past it, and a WARN line (at most one per
// partition per FailureLogInterval, with the count of lines folded into it)
// and FailureStats.Settled record it.
//
// With Retries or MaxElapsed the handler is called again in place, after a
// Backoff wait, with Delivery.Attempt one higher each time, within the
// policy's limits (Retries, MaxElapsed). The retries happen inside the
// exchange's handler call, so the exchanges after it in its group wait,
// those of other aggregates that share its group included (the group is a
// hash of the aggregate id; WithKeyOrdering: its aggregate's only); the other groups of the partition go on, and
// the partition's acknowledged prefix stays below the retried position
// until it ends. A force cancels a wait at once; the position is then not
// finished and is delivered again. A graceful stop (Revoke's drain) waits
// for the retries until its deadline. A wait holds one goroutine of the
// scheduler, as dispatch/middleware's Retry does: for waits longer than a
// handling time, run the named aggregate on a bounded elastic scheduler.
// Once the retries are spent, Then decides: Settle (default), DeadLetter
// or Stop. A failure the retries cannot reach (a runtime.Goexit, a panic
// of the id function or of WithContextOf before the handler, an exchange
// whose own ctx ended without a force) is settled under Settle and stops
// the consumer under DeadLetter or Stop: it is never acknowledged past
// against the policy.
//
// The dispatcher counts a failed delivery as failed whatever the policy
// (dispatch.Stats.Failed); its outcome's error (dispatch.Result.Err) wraps
// the handler's last error, and ErrDeadLettered or ErrHandlerFailed when it
// was dead-lettered or stopped the consumer.
type FailurePolicy struct {
	// Retries is how many times the handler is called again after it
	// failed: 0 (default) none, unless MaxElapsed is set. Negative is
	// invalid.
	Retries int
	// MaxElapsed bounds the time spent retrying, from the first failure:
	// no wait starts that would end after it. 0 (default) sets no bound
	// but Retries; with Retries 0 and MaxElapsed set, the handler is
	// retried until MaxElapsed. Negative is invalid.
	MaxElapsed time.Duration
	// Backoff spaces the retries, and the tries of a dead letter's
	// publication; the zero value is DefaultBackoff.
	Backoff Backoff
	// Then is what happens to a delivery still failing after its retries:
	// Settle() (the zero value), DeadLetter(to) or Stop().
	Then Final
}

// Backoff is an exponential backoff with jitter: the n-th wait (from 1) is
// Min x Factor^(n-1), at most Max, lengthened by a random fraction of
// itself up to Jitter, and again at most Max. A wait is never shorter than
// Min.
type Backoff struct {
	// Min is the first wait and the shortest (0: DefaultBackoff.Min).
	Min time.Duration
	// Max is the longest wait (0: DefaultBackoff.Max, or Min if longer).
	Max time.Duration
	// Factor multiplies the wait after each retry (0: 2; else at least 1).
	Factor float64
	// Jitter is the most a wait is lengthened at random, as a fraction of
	// it, in [0, 1] (0: none).
	Jitter float64
}

// DefaultBackoff is the Backoff of a FailurePolicy that sets none.
var DefaultBackoff = Backoff{Min: 100 * time.Millisecond, Max: 30 * time.Second, Factor: 2, Jitter: 0.5}

// FailureLogInterval is the shortest time between two failure lines of one
// partition and kind (retries; outcomes: settled, dead-lettered): the
// lines in between are counted and the next line says how many were
// folded into it ("folded"). A stop is always logged, at ERROR.
const FailureLogInterval = time.Second

// Final is what a FailurePolicy does once the retries are spent.
type Final struct {
	action action
	to     string
}

type action int8

const (
	settle action = iota
	deadLetter
	stop
)

// Settle makes a failed delivery count as finished, acknowledged past, with
// a WARN line and FailureStats.Settled: the zero Final.
func Settle() Final { return Final{} }

// DeadLetter publishes a failed delivery's record to to, a JetStream
// subject or a Kafka topic, through the binding's client (see the
// binding's WithFailurePolicy for the headers), and makes it count as
// finished only once the broker confirmed the publication. A publication
// that fails is tried again with the policy's Backoff until it succeeds or
// the partition's ctx ends (a force): until then the partition's prefix
// stays below the record, and each failure is logged at WARN and counted
// (FailureStats.DeadLetterErrors); after a force the record is not
// finished and is delivered again.
func DeadLetter(to string) Final { return Final{action: deadLetter, to: to} }

// Stop makes a failed delivery fail its consumer: the error (wrapping
// ErrHandlerFailed and the handler's) becomes the consumer's, which stops
// gracefully; the position is not finished, so the partition acknowledges
// up to the record before it at most, and the record is delivered again to
// the next owner.
func Stop() Final { return Final{action: stop} }

// String returns "settle", "dead-letter to <to>" or "stop".
func (f Final) String() string {
	switch f.action {
	case deadLetter:
		return fmt.Sprintf("dead-letter to %q", f.to)
	case stop:
		return "stop"
	}
	return "settle"
}

// DeadLetterTo returns the dead letters' destination, or "" when the policy
// publishes none.
func (p FailurePolicy) DeadLetterTo() string {
	if p.Then.action != deadLetter {
		return ""
	}
	return p.Then.to
}

// Letter is a failed delivery to publish as a dead letter: where to, where
// it comes from, its last attempt and its error.
type Letter struct {
	// To is the destination named by DeadLetter.
	To string
	// Partition and Position name the record in its source.
	Partition int32
	Position  int64
	// AggregateID is the record's aggregate id.
	AggregateID string
	// Attempt is the attempt of the last failed handler call (see
	// Delivery.Attempt; the retries in place count).
	Attempt int
	// Err is the last handler error.
	Err error
}

// FailureActions is what a broker binding does for a FailurePolicy:
// publish a dead letter, fail the consumer. The bindings set it; a
// Dispatcher used on its own sets it for the policies that need it.
type FailureActions struct {
	// DeadLetter publishes l's record to l.To and returns nil once the
	// broker confirmed it; ctx is the handler's (a force cancels it). It is
	// called on the handler's goroutine; a panic counts as an error.
	DeadLetter func(ctx context.Context, l Letter) error
	// Stop fails the consumer with err (wrapping ErrHandlerFailed). It is
	// called on the handler's goroutine and must not block.
	Stop func(err error)
}

// FailureStats counts what the failure policy did, over every partition.
type FailureStats struct {
	// Retries counts the handler calls made again after a failure.
	Retries int64
	// Settled counts failed deliveries settled (finished with their error).
	Settled int64
	// DeadLettered counts deliveries published as dead letters (and then
	// finished); DeadLetterErrors, publications that failed (each try).
	DeadLettered, DeadLetterErrors int64
	// Stopped counts failed deliveries that stopped the consumer.
	Stopped int64
}

// WithFailurePolicy sets what becomes of a delivery whose handler failed
// (default: the zero FailurePolicy, settle with a WARN line). An invalid
// policy makes NewDispatcher return ErrInvalidArgument naming the field.
// Cost: none while handlers succeed but a deferred call per exchange when
// the policy retries, dead-letters or stops.
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config) { c.failure = p }
}

// WithFailureActions sets the binding's side of the failure policy.
func WithFailureActions(a FailureActions) Option {
	return func(c *config) { c.actions = a }
}

// check validates the policy against the actions and fills in its
// defaults.
func (p *FailurePolicy) check(a FailureActions) error {
	b := &p.Backoff
	var bad string
	switch {
	case p.Retries < 0:
		bad = fmt.Sprintf("FailurePolicy.Retries %d is negative", p.Retries)
	case p.MaxElapsed < 0:
		bad = fmt.Sprintf("FailurePolicy.MaxElapsed %v is negative", p.MaxElapsed)
	case b.Min < 0:
		bad = fmt.Sprintf("FailurePolicy.Backoff.Min %v is negative", b.Min)
	case b.Max < 0 || b.Max != 0 && b.Max < b.Min:
		bad = fmt.Sprintf("FailurePolicy.Backoff.Max %v is below 0 or Min %v", b.Max, b.Min)
	case b.Factor != 0 && !(b.Factor >= 1) || math.IsInf(b.Factor, 0):
		bad = fmt.Sprintf("FailurePolicy.Backoff.Factor %v is below 1", b.Factor)
	case !(b.Jitter >= 0 && b.Jitter <= 1):
		bad = fmt.Sprintf("FailurePolicy.Backoff.Jitter %v is outside [0, 1]", b.Jitter)
	case p.Then.action == deadLetter && p.Then.to == "":
		bad = "FailurePolicy.Then: DeadLetter with an empty destination"
	case p.Then.action == deadLetter && a.DeadLetter == nil:
		bad = fmt.Sprintf("FailurePolicy.Then: DeadLetter(%q) needs a publisher (FailureActions.DeadLetter)", p.Then.to)
	case p.Then.action == stop && a.Stop == nil:
		bad = "FailurePolicy.Then: Stop needs a consumer to stop (FailureActions.Stop)"
	}
	if bad != "" {
		return fmt.Errorf("%w: %s", ErrInvalidArgument, bad)
	}
	if *b == (Backoff{}) {
		*b = DefaultBackoff
	}
	if b.Min == 0 {
		b.Min = DefaultBackoff.Min
	}
	if b.Max == 0 {
		b.Max = max(b.Min, DefaultBackoff.Max)
	}
	if b.Factor == 0 {
		b.Factor = 2
	}
	return nil
}

// wait returns the n-th wait (from 1).
func (b Backoff) wait(n int) time.Duration {
	w := float64(b.Min) * math.Pow(b.Factor, float64(n-1))
	w = min(w, float64(b.Max))
	w += w * b.Jitter * rand.Float64()
	return time.Duration(min(w, float64(b.Max)))
}

// failures is a Dispatcher's failure policy at work: shared by its
// partitions.
type failures[T any] struct {
	name    string
	p       FailurePolicy
	a       FailureActions
	idOf    func(T) string
	logger  *slog.Logger
	wrapped bool // the handler runs inside wrap's: panics are recovered there

	retries, settled, deadLettered, deadLetterErrors, stopped atomic.Int64

	mu    sync.Mutex
	lines map[lineKey]*lines // per partition and kind: the log's rate limit
}

// lineKey says whose rate limit a line counts against: a partition's
// retries (and dead letters tried again), or its outcomes (settled,
// dead-lettered), so that the retries' lines never hide an outcome.
type lineKey struct {
	p       int32
	outcome bool
}

// lines is one partition's rate limit: when it last logged, and what it
// folded since.
type lines struct {
	last   time.Time
	folded int
}

func newFailures[T any](name string, p FailurePolicy, a FailureActions, idOf func(T) string, logger *slog.Logger) *failures[T] {
	return &failures[T]{name: name, p: p, a: a, idOf: idOf, logger: logger, lines: map[lineKey]*lines{},
		wrapped: p.Retries > 0 || p.MaxElapsed > 0 || p.Then.action != settle}
}

// stats returns the counters.
func (f *failures[T]) stats() FailureStats {
	return FailureStats{Retries: f.retries.Load(), Settled: f.settled.Load(), DeadLettered: f.deadLettered.Load(),
		DeadLetterErrors: f.deadLetterErrors.Load(), Stopped: f.stopped.Load()}
}

// verdict is the error a wrapped handler returns once the policy decided
// about a failed delivery: the intake's outcome hook settles by it.
type verdict struct {
	action  action
	attempt int // the last attempt
	err     error
}

func (v *verdict) Error() string { return v.err.Error() }
func (v *verdict) Unwrap() error { return v.err }

// wrap returns h under the policy.
func (f *failures[T]) wrap(h dispatch.Handler[Delivery[T]]) dispatch.Handler[Delivery[T]] {
	return func(ctx context.Context, d Delivery[T]) error {
		err := call(h, ctx, d)
		if err == nil || ctx.Err() != nil {
			return err // done, or cancelled: not a failure
		}
		first := time.Now()
		for n := 1; n <= f.p.Retries || f.p.Retries == 0 && f.p.MaxElapsed > 0; n++ {
			wait := f.p.Backoff.wait(n)
			if f.p.MaxElapsed > 0 && time.Since(first)+wait > f.p.MaxElapsed {
				break
			}
			f.log(ctx, slog.LevelWarn, retrying, d, d.Attempt, "partition: handler failed, retrying", err, slog.Duration("retry_in", wait))
			if !sleep(ctx, wait) {
				return err // a force: the position is delivered again
			}
			f.retries.Add(1)
			d.Attempt++
			if err = call(h, ctx, d); err == nil || ctx.Err() != nil {
				return err
			}
		}
		switch f.p.Then.action {
		case stop:
			return f.stop(ctx, d, d.Attempt, err)
		case deadLetter:
			return f.deadLetter(ctx, d, err)
		}
		return &verdict{action: settle, attempt: d.Attempt, err: err}
	}
}

// call calls h, recovering a panic into a *dispatch.PanicError.
func call[T any](h dispatch.Handler[Delivery[T]], ctx context.Context, d Delivery[T]) (err error) {
	defer component.Catch(&err)
	return h(ctx, d)
}

// sleep waits for d or ctx's end; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stop fails the consumer with the delivery's error.
func (f *failures[T]) stop(ctx context.Context, d Delivery[T], attempt int, err error) error {
	f.stopped.Add(1)
	serr := fmt.Errorf("%w: %q: partition %d, position %d, aggregate %q, attempt %d: %w",
		ErrHandlerFailed, f.name, d.Partition, d.Position, f.id(d), attempt, err)
	f.a.Stop(serr)
	f.log(ctx, slog.LevelError, stopping, d, attempt, "partition: handler failed, stopping", err)
	return &verdict{action: stop, attempt: attempt, err: serr}
}

// deadLetter publishes the delivery's record, trying again until the
// broker confirmed it or ctx ended.
func (f *failures[T]) deadLetter(ctx context.Context, d Delivery[T], err error) error {
	l := Letter{To: f.p.Then.to, Partition: d.Partition, Position: d.Position, AggregateID: f.id(d), Attempt: d.Attempt, Err: err}
	for n := 1; ; n++ {
		perr := publish(f.a.DeadLetter, ctx, l)
		if perr == nil {
			f.deadLettered.Add(1)
			f.log(ctx, slog.LevelWarn, outcome, d, d.Attempt, "partition: handler failed, dead-lettered", err, slog.String("dead_letter", l.To))
			return &verdict{action: deadLetter, attempt: d.Attempt, err: fmt.Errorf("%w to %q: %w", ErrDeadLettered, l.To, err)}
		}
		if ctx.Err() != nil {
			return err // a force: the position is delivered again
		}
		f.deadLetterErrors.Add(1)
		wait := f.p.Backoff.wait(n)
		f.log(ctx, slog.LevelWarn, retrying, d, d.Attempt, "partition: dead letter not published, trying again", err,
			slog.String("dead_letter", l.To), slog.Any("publish_error", perr), slog.Duration("retry_in", wait))
		if !sleep(ctx, wait) {
			return err
		}
	}
}

// publish calls the binding's publisher, recovering its panic.
func publish(pub func(context.Context, Letter) error, ctx context.Context, l Letter) (err error) {
	defer component.Catch(&err)
	return pub(ctx, l)
}

// ended is the intake's part of an outcome: it reports whether the
// position finished (else it is discarded) and counts and logs the
// failures the policy settled.
func (f *failures[T]) ended(ctx context.Context, r *dispatch.Result[Delivery[T]], forced bool) (finished bool) {
	v, _ := r.Err.(*verdict)
	switch {
	case v != nil && v.action == deadLetter:
		return true // confirmed by the broker, whatever came after
	case r.Outcome == dispatch.OutcomeDiscarded, r.Outcome == dispatch.OutcomeCancelled,
		r.Outcome == dispatch.OutcomePanic && forced:
		// A panic (or Goexit) once the force began may be how the handler
		// gave up on its cancelled ctx: not known finished.
		return false
	case v != nil && v.action == stop:
		return false
	case r.Outcome == dispatch.OutcomeSuccess:
		return true
	case v == nil && f.p.Then.action != settle:
		// A failure the wrapper did not decide about: a runtime.Goexit got
		// past it, the route's user code (the id function, WithContextOf)
		// failed before the handler, or the exchange's own ctx ended
		// without a force. It cannot be retried nor published (from an
		// exiting goroutine, or under an ended ctx), so it stops.
		_ = f.stop(ctx, r.Exchange, r.Exchange.Attempt, r.Err)
		return false
	}
	attempt := r.Exchange.Attempt
	if v != nil {
		attempt = v.attempt
	}
	f.settled.Add(1)
	f.log(ctx, slog.LevelWarn, outcome, r.Exchange, attempt, "partition: handler failed, settled", r.Err)
	return true
}

// id returns the delivery's aggregate id, "" if the id function panics.
func (f *failures[T]) id(d Delivery[T]) (id string) {
	var p error
	defer func() {
		if p != nil {
			id = ""
		}
	}()
	defer component.Catch(&p)
	return f.idOf(d.Exchange)
}

// Kinds of failure lines: the rate limit is per partition and kind; a
// stop is never folded.
const (
	retrying = iota
	outcome
	stopping
)

// log logs a failure line unless the partition logged one of its kind less
// than FailureLogInterval ago: then it is folded into the next. A panic's
// line carries its stack.
func (f *failures[T]) log(ctx context.Context, level slog.Level, kind int, d Delivery[T], attempt int, msg string, err error, attrs ...slog.Attr) {
	if !f.logger.Enabled(ctx, level) {
		return
	}
	now := time.Now()
	f.mu.Lock()
	key := lineKey{d.Partition, kind != retrying}
	l := f.lines[key]
	if l == nil {
		l = &lines{}
		f.lines[key] = l
	}
	if kind != stopping && !l.last.IsZero() && now.Sub(l.last) < FailureLogInterval {
		l.folded++
		f.mu.Unlock()
		return
	}
	folded := l.folded
	l.last, l.folded = now, 0
	f.mu.Unlock()
	all := append([]slog.Attr{slog.String("dispatcher", f.name), slog.Int("partition", int(d.Partition)),
		slog.Int64("position", d.Position), slog.String("aggregate_id", f.id(d)), slog.Int("attempt", attempt),
		slog.Any("error", err)}, attrs...)
	if folded > 0 {
		all = append(all, slog.Int("folded", folded))
	}
	if pe := (*component.PanicError)(nil); errors.As(err, &pe) {
		all = append(all, slog.String("stack", string(pe.Stack)))
	}
	f.logger.LogAttrs(ctx, level, msg, all...)
}
