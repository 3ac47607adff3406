// Package flux is a typed, cold stream library: Flux[T] and its operators,
// in the terms of Project Reactor's Flux, bridged to
// github.com/reactivex/rxgo/v2.
//
// # Model
//
// A Flux is a recipe: assembling operators starts nothing, and every
// subscription (Subscribe, Collect, All, Observable) runs the chain afresh.
// Items are pushed downstream one at a time; a push blocks while the
// downstream is busy, which is the backpressure (there is no request(n)). A subscription ends with exactly one
// signal: completion, an error after the items that preceded it, or
// cancellation.
//
// # Threading
//
//   - Synchronous operators (Map, Filter, DoOn*, Take, Skip, TakeUntil, Scan,
//     Reduce, Buffer, OnErrorResume, DoFinally, ConcatMap, and those of Mono
//     but MonoZip) run fused on the goroutine that delivers the item: no
//     goroutine, no channel hop, no allocation per item.
//   - The source runs on the subscribing goroutine, unless SubscribeOn moves
//     it into a task on a scheduler.
//   - PublishOn moves delivery to one Worker of a scheduler; FlatMap runs
//     each inner on a goroutine of its own; GroupBy hands its groups to a
//     FlatMap with a free slot on the subscribing goroutine, and otherwise
//     on a goroutine of its own, and delivers each group on the goroutine
//     (or worker) that subscribes to it.
//   - Merge, Zip and CombineLatest run each source on a goroutine of its
//     own and deliver on the subscribing goroutine, as FlatMapSequential
//     and MergeSequential do with their upstream and each inner, and
//     MonoZip with its second Mono; SwitchMap runs its upstream on one and
//     the inners on the subscribing goroutine (all of it there when the
//     upstream is synchronous); Window runs its upstream on one. The time operators (Interval, Timer,
//     Timeout, DelayElements, Sample, BufferTimeout, WindowTimeout,
//     RetryWhen) use the runtime's timers, which testing/synctest controls.
//   - Whatever the goroutine, items reach a given subscriber serially, never
//     concurrently, and in order (FlatMap and Merge interleave their
//     sources).
//
// # Cancellation and ownership
//
// The context passed to Subscribe bounds the subscription: when it ends, the
// flow ends with its cause. An error returned by onNext, a satisfied Take, or
// breaking out of a range loop over All cancels the upstream. Every
// goroutine and task a subscription starts is joined before Subscribe
// returns, on every exit path, with two documented exceptions: rxgo's
// goroutines behind FromObservable are cancelled, not joined, and exit on
// their own (see FromObservable); the upstream of a Publish(...).RefCount(n)
// or Share is joined by its last subscriber to leave. Items already pulled
// and then dropped by a cancellation, a timeout, sampling, distinct
// filtering or a switched-away inner are given to the discard hook
// installed with DoOnDiscard, with the reason, so nothing is lost silently.
// A panic in any function handed to this package ends the flow with an
// error carrying *PanicError; the process survives.
//
// Three operators configure the operators upstream of them for one
// subscription: DoOnDiscard,
// OnErrorContinue and LimitRate. They carry their setting in the
// subscription's context internally; the user passes none through a
// context.
//
// # Reactor to flux
//
//	Reactor                          flux                                       cases
//	Flux.just / fromArray            Just / FromSlice                           0
//	Flux.range                       Range                                      0
//	Flux.fromIterable / fromStream   FromSeq                                    0
//	Flux.empty / error / defer       Empty / Error / Defer                      0
//	Flux.create(FluxSink)            Create(func(ctx, Sink[T]) error)           0
//	Flux.from(Publisher)             FromObservable (rxgo), FromChannel         0
//	map / filter                     Map / Filter                               1
//	take / skip / takeUntil          Take / Skip / TakeUntil                    0
//	doOnNext / doOnError             DoOnNext / DoOnError                       0
//	doOnComplete / doFinally         DoOnComplete / DoFinally                   0
//	onErrorResume                    OnErrorResume                              0
//	buffer(n) / reduce / scan        Buffer / Reduce / Scan                     0
//	concatMap (prefetch 0)           ConcatMap                                  0
//	flatMap(f, concurrency)          FlatMap                                    0
//	switchMap                        SwitchMap                                  14
//	Flux.merge / mergeDelayError     Merge / MergeDelayError                    0
//	Flux.concat / concatDelayError   Concat / ConcatDelayError                  0
//	Flux.zip(a, b, combinator)       Zip(a, b, fn)                              0
//	Flux.combineLatest(a, b, comb.)  CombineLatest(a, b, fn)                    0
//	retry(n)                         Retry(n)                                   0
//	onErrorReturn / onErrorMap       OnErrorReturn / OnErrorMap                 0
//	onErrorContinue                  OnErrorContinue[T, U]                      0
//	distinct / distinct(key)         Distinct / DistinctBy                      0
//	distinctUntilChanged(key)        DistinctUntilChanged(By)                   0
//	defaultIfEmpty / switchIfEmpty   DefaultIfEmpty / SwitchIfEmpty             0
//	Flux.using                       Using                                      0
//	limitRate(n)                     LimitRate(n)                               0
//	groupBy(key, prefetch)           GroupBy(f, key, groups, WithGroupBuffer(n)) 0
//	groupBy(key) by any key          GroupByKey(f, key, maxGroups), KeyedFlux   4
//	flatMapSequential(f, c, prefetch)
//	                                 FlatMapSequential(f, fn, c, prefetch)      9
//	concatMapEager (RxJava)          ConcatMapEager = FlatMapSequential         0
//	Flux.mergeSequential             MergeSequential                            1
//	Mono<T>                          Mono[T]; m.Flux() is it as a Flux          0
//	Mono.just / empty / error        MonoJust / MonoEmpty / MonoError           4
//	Mono.fromCallable                MonoFromFunc(func() (T, error))            4
//	Mono map / flatMap / flatMapMany MonoMap / MonoFlatMap / MonoFlatMapMany    7
//	Mono.zip(a, b, combinator)       MonoZip(a, b, fn)                          6
//	then(Mono) / thenReturn(v)       Then(f, m) / ThenReturn(f, v)              3
//	Mono defaultIfEmpty / timeout    m.DefaultIfEmpty / m.Timeout / m.Retry(n)  5
//	block() / blockOptional()        m.Block(ctx) (v, ok, err)                  0
//	next / last / single             Next / Last / Single (ErrNoSuchElement)    10
//	elementAt(i) / count             ElementAt(i) / Count                       8
//	collectList / collectMap         CollectList / CollectMap                   5
//	collectMultimap / collectSorted  CollectMultimap / CollectSorted(f, cmp)    5
//	hasElements / any / all          HasElements / Any / Every                  0
//	ignoreElements                   IgnoreElements                             0
//	publishOn(s, prefetch)           PublishOn(s, prefetch)                     0
//	subscribeOn(s)                   SubscribeOn(s)                             0
//	Flux.interval / Mono.delay       Interval / Timer                           0
//	delayElements                    DelayElements                              0
//	timeout(d) / (d, fallback)       Timeout / TimeoutTo                        0
//	sample(d)                        Sample                                     0
//	bufferTimeout(n, d)              BufferTimeout                              0
//	window(n) / windowTimeout(n, d)  Window / WindowTimeout                     0
//	retryWhen(Retry.backoff / max)   RetryWhen(RetryBackoff / RetryMax)         1
//	doOnDiscard(Class, Consumer)     DoOnDiscard                                0
//	doOnSubscribe / doOnCancel       DoOnSubscribe / DoOnCancel                 7
//	doOnTerminate / doAfterTerminate DoOnTerminate / DoAfterTerminate           8
//	doOnEach(Signal<T>)              DoOnEach(func(Event[T]))                   7
//	onBackpressureBuffer(n, strategy)
//	                                 OnBackpressureBuffer(n, BufferOverflow)    6
//	onBackpressureDrop / Latest      OnBackpressureDrop / OnBackpressureLatest  4
//	subscribe + blockLast            Subscribe                                  0
//	collectList().block()            Collect                                    0
//	toIterable / toStream            All                                        0
//	Sinks.Many, Sinks.EmitResult     ManySink, EmitResult                       0
//	unicast().onBackpressureBuffer   NewUnicastSink(capacity)                   1
//	multicast().onBackpressureBuffer NewMulticastSink(capacity)                 0
//	replay().limit(n)                NewReplaySink(n, capacity)                 0
//	tryEmitNext / emitNext           TryEmitNext / EmitNext(ctx, v)             0
//	DROP_OLDEST overflow strategy    WithDropOldest()                           0
//	publish(prefetch).refCount(n)    Publish(capacity).RefCount(n)              0
//	share()                          Share                                      0
//	onErrorResume(pred, f)           OnErrorResumeIf(pred, f)                   10
//	onErrorComplete() / (pred)       OnErrorComplete / OnErrorCompleteIf        8
//	Retry.fixedDelay(n, d)           RetryFixedDelay(n, d)                      8
//	RetrySpec.filter(pred)           RetrySpec.WithFilter(pred)                 3
//	log(category, level)             Log(logger, category, WithLogLevel)        9
//	checkpoint(description) / name   Checkpoint(description) / Name             6
//	startWith(T...) / concatWith     StartWith(vs...) / ConcatWith              2
//	mergeWith                        MergeWith                                  2
//	zip(a, b, c[, d], combinator)    Zip3 / Zip4                                10
//	zip(Iterable, combinator)        ZipN([]Flux[T]) Flux[[]T]                  5
//	takeWhile / skipWhile            TakeWhile / SkipWhile                      12
//	takeLast(n) / skipLast(n)        TakeLast / SkipLast                        12
//	repeat(n) / repeat(n, supplier)  Repeat(n) / RepeatWhen(RepeatSpec)         16
//	repeatWhen(RepeatSpec)           RepeatWhen, RepeatTimes, RepeatFixedDelay  4
//	replay(n) / autoConnect(n)       Replay(n) / AutoConnect(n)                 6
//	cache(n)                         Cache(n)                                   4
//	sampleTimeout(v -> delay(d))     Debounce(d)                                5
//	buffer(Duration)                 BufferDuration(f, d)                       1
//	bufferUntil(p[, cutBefore])      BufferUntil(f, p, cutBefore)               7
//	bufferWhile(p)                   BufferWhile(f, p)                          6
//	elapsed() / timestamp()          Elapsed(f) / Timestamp(f)                  2
//	StepVerifier                     testkit.Verify                             0
//
// The column cases counts the test cases of Reactor's own test suite
// (reactor-core's FluxXxxTest, MonoXxxTest) translated into this package's
// tests for the row. The table's rows, and where flux deliberately differs
// from Reactor, are in docs/from-reactor-and-wow.md. In short:
//
// GroupBy has a fixed key space [0, groups) and bounded group queues; the
// groups not yet handed downstream when the upstream fails are handed out,
// with their items and the error; after an early stop of the main flux
// (Take) the items of keys not taken go to the discard hook, and the stop
// returns once the groups taken have ended; a GroupBy flow that can never
// move again (more groups than FlatMap's concurrency, or ConcatMap over
// groups, with the waiting groups full beyond WithStallBuffer) fails with
// ErrStalled. GroupByKey bounds its live groups (ErrTooManyGroups). A Mono
// is a separate type whose Flux method gives the Flux, and Block returns
// (v, ok, err). ConcatMap always has prefetch 0.
// PublishOn's drain yields its goroutine after each batch, so pipelines
// sharing a scheduler are served fairly. DoFinally runs just before the
// terminal signal reaches the operators after it (a terminal signal is the
// return of a subscribe call).
package flux
