package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/flux"
	"github.com/aggflow/aggflow/testkit"
)

// Handler behaviours beyond testkit's.
const (
	// lpHold blocks until the world's handler release, whatever the ctx
	// does (only the release ends it).
	lpHold = testkit.Behaviour(100 + iota)
	// lpSelfStop calls its own dispatcher's StopGracefully with the
	// handler's ctx, which must return ErrIllegalState at once.
	lpSelfStop
	// lpSelfForce calls its own dispatcher's ForceStop, which must return at
	// once, then returns nil.
	lpSelfForce
)

// lpRepeats is how many times each case runs: the same virtual schedule,
// another interleaving of the goroutines that run at one instant.
const lpRepeats = 3

// lpHang is how long, in virtual time, the lifecycle properties wait for
// something that must happen before they call it stuck.
const lpHang = 10 * time.Minute

// lpHorizon bounds how long, in virtual time, the Stats reader reads.
const lpHorizon = 3 * time.Second

// Source kinds of the lifecycle properties.
const (
	lpSlice   = "slice"       // a finite flux.FromSlice
	lpEndless = "endless"     // a paced endless flux.Create that honours ctx
	lpIgnores = "ignores-ctx" // emits, then ignores ctx until released, then emits more
	lpPanics  = "panics"      // emits, then panics
	lpFails   = "fails"       // emits, then returns an error
	lpPush    = "push"        // nil source: goroutines call Emit
	lpBatches = "batches"     // a paced endless dispatch.BatchSource of batches of 1 to 9, honouring ctx
)

var lpSourceKinds = []string{lpSlice, lpEndless, lpIgnores, lpPanics, lpFails, lpPush, lpBatches}

// errLpSource is what a failing source returns.
var errLpSource = errors.New("lp: source failed")

// lpWorld is what one case shares: the violations seen, the releases of
// what is held, and the lock that serialises synctest.Wait.
type lpWorld struct {
	mu         sync.Mutex
	violations []string

	waitSem chan struct{} // one goroutine at a time in synctest.Wait

	hold, srcHold         chan struct{} // closed by the releases
	holdOnce, srcHoldOnce sync.Once
	end                   chan struct{} // closed when the case ends its calls
	endOnce               sync.Once
}

func lpNewWorld() *lpWorld {
	return &lpWorld{
		waitSem: make(chan struct{}, 1),
		hold:    make(chan struct{}), srcHold: make(chan struct{}), end: make(chan struct{}),
	}
}

func (w *lpWorld) report(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, fmt.Sprintf("[t=%v] ", lpNow())+fmt.Sprintf(format, args...))
}

// lpEpoch is the bubble's start: synctest starts every bubble at the same
// instant.
var lpEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func lpNow() time.Duration { return time.Since(lpEpoch) }

func (w *lpWorld) releaseHandlers() { w.holdOnce.Do(func() { close(w.hold) }) }
func (w *lpWorld) releaseSources()  { w.srcHoldOnce.Do(func() { close(w.srcHold) }) }
func (w *lpWorld) ended()           { w.endOnce.Do(func() { close(w.end) }) }

// releaseAt releases with f after d of virtual time, unless the case ended
// first; d < 0 leaves it to the end of the case.
func (w *lpWorld) releaseAt(wg *sync.WaitGroup, d time.Duration, f func()) {
	if d < 0 {
		return
	}
	wg.Go(func() {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			f()
		case <-w.end:
		}
	})
}

// atOnce runs f, which must return at once: on a goroutine, then
// synctest.Wait (every other goroutine of the bubble durably blocked); f
// must have returned by then, and no virtual time may have passed.
func (w *lpWorld) atOnce(what string, f func()) {
	w.waitSem <- struct{}{}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	synctest.Wait()
	returned := testkit.Closed(done)
	<-w.waitSem
	if !returned {
		w.report("%s blocked: it had not returned once the bubble was idle", what)
	}
	w.wait(what, done)
	if took := time.Since(start); took > 0 {
		w.report("%s took %v of virtual time, it must return at once", what, took)
	}
}

// wait waits for ch, reporting it if it takes lpHang.
func (w *lpWorld) wait(what string, ch <-chan struct{}) bool {
	timer := time.NewTimer(lpHang)
	defer timer.Stop()
	select {
	case <-ch:
		return true
	case <-timer.C:
		w.report("%s: still waiting after %v", what, lpHang)
		return false
	}
}

// waitGroup waits for wg, reporting it if it takes lpHang.
func (w *lpWorld) waitGroup(what string, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return w.wait(what, done)
}

// lpGen makes the i-th exchange of a stream: over ids ids (spread over
// named), each id's exchanges numbered 0, 1, 2... in stream order, with the
// behaviour behaviours[i % len].
type lpGen struct {
	prefix     string
	named      []aggregate.MaterializedNamedAggregate
	ids        int
	behaviours []testkit.Behaviour
}

func (g lpGen) at(i int) testkit.Exchange {
	k := i % g.ids
	return testkit.Exchange{
		ID:    aggregate.NewID(g.named[k%len(g.named)], g.prefix+strconv.Itoa(k)),
		Seq:   i / g.ids,
		Do:    g.behaviours[i%len(g.behaviours)],
		Delay: time.Duration(1+i%3) * time.Millisecond,
	}
}

// lpCounting counts every exchange its source hands to the intake's emit.
type lpCounting struct {
	src dispatch.Source[testkit.Exchange]
	n   *atomic.Int64
}

func (c lpCounting) Subscribe(ctx context.Context, emit func(testkit.Exchange) error) error {
	return c.src.Subscribe(ctx, func(x testkit.Exchange) error {
		c.n.Add(1)
		return emit(x)
	})
}

// lpRaw is a source written by hand, as a user would: it emits n exchanges
// without looking at ctx; then, for lpIgnores, it waits for the release
// (ignoring ctx) and emits n more until the intake refuses one; for
// lpPanics, it panics.
type lpRaw struct {
	kind    string
	gen     lpGen
	n       int
	release <-chan struct{}
}

func (r lpRaw) Subscribe(_ context.Context, emit func(testkit.Exchange) error) error {
	i := 0
	for ; i < r.n; i++ {
		if err := emit(r.gen.at(i)); err != nil {
			return err
		}
	}
	if r.kind == lpPanics {
		panic("lp: source panicked")
	}
	<-r.release
	for ; i < 2*r.n; i++ {
		if err := emit(r.gen.at(i)); err != nil {
			return err
		}
	}
	return nil
}

// lpSource returns the source of kind (nil for lpPush), counting into n.
func lpSource(kind string, gen lpGen, count int, pace time.Duration, release <-chan struct{}, n *atomic.Int64) dispatch.Source[testkit.Exchange] {
	var src dispatch.Source[testkit.Exchange]
	switch kind {
	case lpPush:
		return nil
	case lpSlice:
		xs := make([]testkit.Exchange, count)
		for i := range xs {
			xs[i] = gen.at(i)
		}
		src = flux.FromSlice(xs)
	case lpEndless:
		src = flux.Create(func(ctx context.Context, sink flux.Sink[testkit.Exchange]) error {
			timer := time.NewTimer(pace)
			defer timer.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-timer.C:
					timer.Reset(pace)
				}
				if err := sink.Next(gen.at(i)); err != nil {
					return err
				}
			}
		})
	case lpFails:
		src = flux.Create(func(ctx context.Context, sink flux.Sink[testkit.Exchange]) error {
			for i := range count {
				if err := sink.Next(gen.at(i)); err != nil {
					return err
				}
			}
			return errLpSource
		})
	case lpIgnores, lpPanics:
		src = lpRaw{kind: kind, gen: gen, n: count, release: release}
	case lpBatches: // counts itself: a wrapper would hide its batches
		return dispatch.BatchSource(func(ctx context.Context, emit func([]testkit.Exchange) error) error {
			timer := time.NewTimer(pace)
			defer timer.Stop()
			var xs []testkit.Exchange
			for i := 0; ; {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-timer.C:
					timer.Reset(pace)
				}
				xs = xs[:0]
				for range 1 + (i*7+count)%9 { // sizes 1 to 9 in a mixed order
					xs = append(xs, gen.at(i))
					i++
				}
				n.Add(int64(len(xs)))
				if err := emit(xs); err != nil {
					return err
				}
			}
		})
	default:
		panic("lp: unknown source kind " + kind)
	}
	return lpCounting{src: src, n: n}
}

// lpTarget is what the lifecycle properties call: Dispatcher,
// MainDispatcher, Runtime.
type lpTarget interface {
	component.Component
	State() component.State
	Run(ctx context.Context) error
}

// lpIntake is a Dispatcher or a MainDispatcher of testkit.Exchange.
type lpIntake interface {
	lpTarget
	Stats() dispatch.Stats
	Emit(ctx context.Context, x testkit.Exchange) error
}

// lpObserver is a countingObserver that also checks a Stats snapshot at
// each end of an exchange, from whichever goroutine ends it.
type lpObserver struct {
	*countingObserver
	w     *lpWorld
	name  string
	stats atomic.Pointer[func() dispatch.Stats]
}

func (o *lpObserver) Finished(ctx context.Context, l dispatch.Labels, out dispatch.Outcome, took time.Duration, err error) {
	o.countingObserver.Finished(ctx, l, out, took, err)
	o.snapshot()
}

func (o *lpObserver) Discarded(ctx context.Context, l dispatch.Labels, reason error) {
	o.countingObserver.Discarded(ctx, l, reason)
	o.snapshot()
}

func (o *lpObserver) snapshot() {
	if f := o.stats.Load(); f != nil {
		lpCheckSnapshot(o.w, o.name+" (observer)", (*f)())
	}
}

// lpCheckSnapshot checks the identity of one Stats snapshot.
func lpCheckSnapshot(w *lpWorld, who string, s dispatch.Stats) {
	if s.InFlight < 0 || s.Received != s.Succeeded+s.Failed+s.Discarded+s.InFlight {
		w.report("%s: snapshot breaks the identity: %+v", who, s)
	}
}

// lpStatsSeq is the snapshots one goroutine read, in order: no counter may
// decrease from one to the next.
type lpStatsSeq struct {
	who  string
	last dispatch.Stats
}

func (q *lpStatsSeq) see(w *lpWorld, s dispatch.Stats) {
	lpCheckSnapshot(w, q.who, s)
	l := q.last
	if s.Received < l.Received || s.Succeeded < l.Succeeded || s.Failed < l.Failed || s.Discarded < l.Discarded {
		w.report("%s: a counter decreased: %+v, then %+v", q.who, l, s)
	}
	q.last = s
}

// lpProbe is what one dispatcher of a case is watched with.
type lpProbe struct {
	name    string
	d       lpIntake
	rec     *testkit.Recorder[testkit.Exchange]
	obs     *lpObserver
	hooked  atomic.Int64
	emitted atomic.Int64 // exchanges handed to the intake: by the source, or Emit calls that returned nil
	results lpResults

	kind    string // source kind
	gen     lpGen
	count   int
	emitter int // push mode: Emit goroutines
	pace    time.Duration
	perKey  bool // set by options
}

// fresh returns a probe of the same drawn feed, with nothing seen yet.
func (p *lpProbe) fresh() *lpProbe {
	return &lpProbe{name: p.name, kind: p.kind, gen: p.gen, count: p.count, emitter: p.emitter, pace: p.pace}
}

// lpShape is what varies in the dispatchers of a case.
type lpShape struct {
	groups, budget int
	policy         dispatch.ErrorPolicy
	stopTimeout    time.Duration
	perKey         bool // WithKeyOrdering
}

// options returns the options of a dispatcher watched by p.
func (p *lpProbe) options(w *lpWorld, sh lpShape) []dispatch.Option[testkit.Exchange] {
	p.obs = &lpObserver{countingObserver: &countingObserver{}, w: w, name: p.name}
	p.perKey = sh.perKey
	var keyed dispatch.Option[testkit.Exchange]
	if sh.perKey {
		keyed = dispatch.WithKeyOrdering()
	}
	return []dispatch.Option[testkit.Exchange]{
		keyed,
		quiet,
		dispatch.WithParallelism(sh.groups),
		dispatch.WithMaxPending(sh.budget),
		dispatch.WithErrorPolicy(sh.policy),
		dispatch.WithStopTimeout(sh.stopTimeout),
		dispatch.WithObserver(p.obs),
		dispatch.WithDiscardHook(func(testkit.Exchange, error) { p.hooked.Add(1) }),
		dispatch.WithOutcomeHook(p.results.record),
		dispatch.WithOutcomeHook(func(_ context.Context, r dispatch.Result[testkit.Exchange]) {
			if r.Exchange.Seq%7 == 3 {
				panic("outcome hook") // must not break the accounting
			}
		}),
	}
}

// lpResults is what the outcome hook saw: how often each exchange ended,
// and the outcomes by kind.
type lpResults struct {
	mu       sync.Mutex
	ends     map[string]int
	outcomes [5]int64
	labels   map[dispatch.Labels]bool
}

func (r *lpResults) record(_ context.Context, res dispatch.Result[testkit.Exchange]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ends == nil {
		r.ends, r.labels = map[string]int{}, map[dispatch.Labels]bool{}
	}
	r.ends[res.Exchange.ID.String()+"#"+strconv.Itoa(res.Exchange.Seq)]++
	r.outcomes[res.Outcome]++
	r.labels[res.Labels] = true
}

// check reports an exchange that ended twice and counts that disagree with s.
func (r *lpResults) check(w *lpWorld, name string, s dispatch.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, n := range r.ends {
		if n != 1 {
			w.report("%s: outcome hook called %d times for %s", name, n, k)
		}
	}
	o := r.outcomes
	if o[0]+o[1]+o[2]+o[3]+o[4] != s.Received || o[dispatch.OutcomeSuccess] != s.Succeeded ||
		o[dispatch.OutcomeError]+o[dispatch.OutcomePanic]+o[dispatch.OutcomeCancelled] != s.Failed ||
		o[dispatch.OutcomeDiscarded] != s.Discarded {
		w.report("%s: outcome hook saw %v over %d exchanges, stats %+v", name, o, len(r.ends), s)
	}
	for l := range r.labels {
		if l.Dispatcher == "" {
			w.report("%s: outcome hook saw labels %+v", name, l)
		}
	}
}

// recorder returns the recorder of p's handler: child gives the group
// numbering of a MainDispatcher's children apart.
func (p *lpProbe) recorder(w *lpWorld, groups int, child func(testkit.Exchange) int) {
	p.rec = testkit.NewRecorder(func(x testkit.Exchange) testkit.Tag {
		return testkit.Tag{Key: x.ID.String(), Seq: x.Seq, Group: child(x)*groups + x.ID.Mod(groups)}
	}, func(ctx context.Context, x testkit.Exchange) error {
		switch x.Do {
		case lpHold:
			<-w.hold
			return nil
		case lpSelfStop:
			start := time.Now()
			err := p.d.StopGracefully(ctx)
			if !errors.Is(err, dispatch.ErrIllegalState) {
				w.report("%s: StopGracefully from its own handler returned %v, not ErrIllegalState", p.name, err)
			}
			if took := time.Since(start); took > 0 {
				w.report("%s: StopGracefully from its own handler took %v", p.name, took)
			}
			return nil
		case lpSelfForce:
			start := time.Now()
			p.d.ForceStop()
			if took := time.Since(start); took > 0 {
				w.report("%s: ForceStop from its own handler took %v", p.name, took)
			}
			return nil
		}
		return testkit.Perform(ctx, x)
	})
}

// source returns p's source, counted into p.emitted.
func (p *lpProbe) source(w *lpWorld) dispatch.Source[testkit.Exchange] {
	return lpSource(p.kind, p.gen, p.count, p.pace, w.srcHold, &p.emitted)
}

// watch makes the observer read p's Stats.
func (p *lpProbe) watch(d lpIntake) {
	p.d = d
	stats := d.Stats
	p.obs.stats.Store(&stats)
}

// emit runs p's Emit goroutines (push mode): each emits its count of
// exchanges, one per pace, retrying while the dispatcher is not running
// yet, until it stopped or ctx ended.
func (p *lpProbe) emit(w *lpWorld, ctx context.Context, wg *sync.WaitGroup) {
	if p.kind != lpPush {
		return
	}
	for e := range p.emitter {
		gen := p.gen
		gen.prefix += "e" + strconv.Itoa(e) + "-"
		wg.Go(func() {
			timer := time.NewTimer(p.pace)
			defer timer.Stop()
			for i, attempts := 0, 0; i < p.count && attempts < 400; attempts++ {
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
					timer.Reset(p.pace)
				}
				err := p.d.Emit(ctx, gen.at(i))
				switch {
				case err == nil:
					p.emitted.Add(1)
					i++
				case errors.Is(err, dispatch.ErrStopped):
					if p.d.State() >= component.StateStopping {
						return
					}
				case ctx.Err() != nil:
					return
				default:
					w.report("%s: Emit: %v", p.name, err)
					return
				}
			}
		})
	}
}

// check checks p's dispatcher once Done closed and nothing else runs.
func (p *lpProbe) check(w *lpWorld) {
	d := p.d
	if !testkit.Closed(d.Done()) {
		w.report("%s: Done not closed", p.name)
		return
	}
	if st := d.State(); st != component.StateStopped {
		w.report("%s: state %v after Done", p.name, st)
	}
	s := d.Stats()
	lpCheckSnapshot(w, p.name+" after Done", s)
	calls := p.rec.Calls()
	for _, err := range []error{
		testkit.NoLoss(p.emitted.Load(), s, calls), testkit.PerKeyFIFO(calls), serial(p.perKey, calls),
	} {
		if err != nil {
			w.report("%s: %v (%+v)", p.name, err, s)
		}
	}
	p.results.check(w, p.name, s)
	if h := p.hooked.Load(); h != s.Discarded {
		w.report("%s: discard hook called %d times, %d discarded", p.name, h, s.Discarded)
	}
	if o := p.obs.discarded.Load(); o != s.Discarded {
		w.report("%s: Observer.Discarded called %d times, %d discarded", p.name, o, s.Discarded)
	}
	if f, o := p.obs.finishedTotal(), p.obs.discarded.Load(); f+o != s.Received {
		w.report("%s: Observer saw %d finished + %d discarded, %d received", p.name, f, o, s.Received)
	}
	if again := d.Stats(); again != s {
		w.report("%s: counters moved after Done: %+v, then %+v", p.name, s, again)
	}
}

// lpOp is one call of a case, on one goroutine, after a pause: within is
// the life of its ctx (StopGracefully, Run).
type lpOp struct {
	target int
	op     string
	pause  time.Duration
	within time.Duration
}

var lpOps = []string{"Prepare", "Start", "Quiesce", "StopGracefully", "ForceStop", "Run"}

// lpDrawOps draws the calls of one goroutine on targets targets; the first
// target is drawn most often.
func lpDrawOps(t *rapid.T, label string, targets int) []lpOp {
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) lpOp {
		target := 0
		if targets > 1 && rapid.IntRange(0, 3).Draw(t, "other target") == 0 {
			target = rapid.IntRange(1, targets-1).Draw(t, "target")
		}
		return lpOp{
			target: target,
			op:     rapid.SampledFrom(lpOps).Draw(t, "op"),
			pause:  time.Duration(rapid.IntRange(0, 40).Draw(t, "pause ms")) * time.Millisecond,
			within: time.Duration(rapid.IntRange(0, 60).Draw(t, "ctx ms")) * time.Millisecond,
		}
	}), 1, 5).Draw(t, label)
}

// lpCall makes call op on c and checks it returns within its bound:
// Prepare, Start, Quiesce and ForceStop at once, StopGracefully by its
// deadline (and by limit, if positive: a Runtime's shutdown timeout), Run
// by its ctx's end plus twice the stop timeout runFor (the graceful stop's,
// then the forced handlers'), and after Done unless it says it gave up.
func lpCall(w *lpWorld, c lpTarget, op lpOp, runFor, limit time.Duration) {
	what := fmt.Sprintf("%s %q", op.op, c.Name())
	switch op.op {
	case "Prepare":
		w.atOnce(what, func() { _ = c.Prepare(context.Background()) })
	case "Start":
		w.atOnce(what, func() { _ = c.Start() })
	case "Quiesce":
		w.atOnce(what, c.Quiesce)
		if st := c.State(); st < component.StateStopping {
			w.report("%s: state %v after it returned", what, st)
		}
	case "ForceStop":
		w.atOnce(what, c.ForceStop)
		if st := c.State(); st != component.StateStopped {
			w.report("%s: state %v after it returned", what, st)
		}
	case "StopGracefully":
		ctx, cancel := context.WithTimeout(context.Background(), op.within)
		defer cancel()
		bound := op.within
		if limit > 0 {
			bound = min(bound, limit)
		}
		start := time.Now()
		err := c.StopGracefully(ctx)
		if took := time.Since(start); took > bound {
			w.report("%s within %v took %v", what, op.within, took)
		}
		if _, rt := c.(*component.Runtime); err == nil && !rt && !testkit.Closed(c.Done()) {
			w.report("%s returned nil before Done closed", what)
		}
		if st := c.State(); st < component.StateStopping {
			w.report("%s: state %v after it returned", what, st)
		}
	case "Run":
		ctx, cancel := context.WithTimeout(context.Background(), op.within)
		defer cancel()
		start := time.Now()
		err := c.Run(ctx)
		if took, bound := time.Since(start), op.within+2*runFor; took > bound {
			w.report("%s within %v took %v, more than %v", what, op.within, took, bound)
		}
		if !testkit.Closed(c.Done()) && !errors.Is(err, dispatch.ErrShutdownTimeout) {
			w.report("%s returned %v before Done closed", what, err)
		}
	}
}

// lpDrawProbe draws how one dispatcher is fed.
func lpDrawProbe(t *rapid.T, name, prefix string, named []aggregate.MaterializedNamedAggregate) *lpProbe {
	p := &lpProbe{
		name: name,
		kind: rapid.SampledFrom(lpSourceKinds).Draw(t, name+" source"),
		gen: lpGen{
			prefix: prefix, named: named,
			ids: rapid.IntRange(1, 12).Draw(t, name+" ids"),
			behaviours: rapid.SliceOfN(rapid.SampledFrom([]testkit.Behaviour{
				testkit.Instant, testkit.Instant, testkit.Instant, testkit.Delay, testkit.Delay,
				testkit.Fail, testkit.Panic, lpHold, testkit.Block, lpSelfStop, lpSelfForce,
			}), 1, 8).Draw(t, name+" behaviours"),
		},
		count:   rapid.IntRange(0, 64).Draw(t, name+" count"),
		emitter: rapid.IntRange(1, 3).Draw(t, name+" emitters"),
		pace:    time.Duration(rapid.IntRange(500, 4000).Draw(t, name+" pace µs")) * time.Microsecond,
	}
	return p
}

// lpDrawShape draws the configuration of the dispatchers of a case.
func lpDrawShape(t *rapid.T) lpShape {
	return lpShape{
		groups:      rapid.IntRange(1, 16).Draw(t, "groups"),
		budget:      rapid.IntRange(1, 64).Draw(t, "budget"),
		policy:      rapid.SampledFrom([]dispatch.ErrorPolicy{dispatch.Continue, dispatch.StopOnError}).Draw(t, "policy"),
		stopTimeout: time.Duration(rapid.IntRange(1, 50).Draw(t, "stop timeout ms")) * time.Millisecond,
		perKey:      rapid.Bool().Draw(t, "per key"),
	}
}

// lpEnding is how a case releases what is held and ends.
type lpEnding struct {
	handlerRelease, sourceRelease time.Duration // < 0: at the end
	releaseFirst                  bool          // release before the final force, else after
}

func lpDrawEnding(t *rapid.T) lpEnding {
	at := func(label string) time.Duration {
		if rapid.Bool().Draw(t, label+" at the end") {
			return -1
		}
		return time.Duration(rapid.IntRange(0, 150).Draw(t, label+" ms")) * time.Millisecond
	}
	return lpEnding{
		handlerRelease: at("handler release"),
		sourceRelease:  at("source release"),
		releaseFirst:   rapid.Bool().Draw(t, "release before the final force"),
	}
}

// lpPlay runs a case in the bubble: the releases at their points, a Stats
// reader all along, the Emit goroutines, the calls from one goroutine per
// list of ops; then it releases what is held and force-stops root (in the
// drawn order), waits for its Done and checks every probe. targets are what
// ops call, root the first of them, each bounded by its bounds.
func lpPlay(t *rapid.T, w *lpWorld, targets []lpTarget, bounds []lpBound, probes []*lpProbe, calls [][]lpOp, end lpEnding) {
	root := targets[0]
	var background, emitters, callers sync.WaitGroup
	w.releaseAt(&background, end.handlerRelease, w.releaseHandlers)
	w.releaseAt(&background, end.sourceRelease, w.releaseSources)

	stopReading := make(chan struct{})
	background.Go(func() {
		seqs := make([]lpStatsSeq, len(probes))
		for i, p := range probes {
			seqs[i].who = p.name + " (reader)"
		}
		for start := time.Now(); time.Since(start) < lpHorizon; {
			for i, p := range probes {
				seqs[i].see(w, p.d.Stats())
			}
			select {
			case <-stopReading:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})

	emitCtx, cancelEmit := context.WithCancel(context.Background())
	defer cancelEmit()
	for _, p := range probes {
		p.emit(w, emitCtx, &emitters)
	}

	for g, ops := range calls {
		callers.Go(func() {
			seqs := make([]lpStatsSeq, len(probes))
			for i, p := range probes {
				seqs[i].who = fmt.Sprintf("%s (caller %d)", p.name, g)
			}
			for _, op := range ops {
				time.Sleep(op.pause)
				b := bounds[op.target]
				lpCall(w, targets[op.target], op, b.runFor, b.limit)
				for i, p := range probes {
					seqs[i].see(w, p.d.Stats())
				}
			}
		})
	}
	w.waitGroup("the calls", &callers)

	release := func() {
		w.releaseHandlers()
		w.releaseSources()
	}
	if end.releaseFirst {
		release()
	}
	w.atOnce(fmt.Sprintf("final ForceStop %q", root.Name()), root.ForceStop)
	if !end.releaseFirst {
		release()
	}
	w.wait(fmt.Sprintf("Done of %q after the final ForceStop", root.Name()), root.Done())
	for _, c := range targets {
		if st := c.State(); st != component.StateStopped {
			w.report("%q: state %v once the final ForceStop's Done closed", c.Name(), st)
		}
	}
	cancelEmit()
	w.waitGroup("the Emit goroutines", &emitters)
	w.ended()
	close(stopReading)
	w.waitGroup("the releases and the reader", &background)
	for _, p := range probes {
		p.check(w)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		t.Error(v)
	}
}

// lpBound is what bounds the calls of one target beyond their ctx: Run
// waits its ctx and runFor more at most; StopGracefully, limit at most if
// positive.
type lpBound struct{ runFor, limit time.Duration }
