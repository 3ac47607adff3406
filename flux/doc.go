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
//     the inners on the subscribing goroutine; Window runs its upstream on
//     one. The time operators (Interval, Timer,
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
//	Reactor                          flux
//	Flux.just / fromArray            Just / FromSlice
//	Flux.range                       Range
//	Flux.fromIterable / fromStream   FromSeq
//	Flux.empty / error / defer       Empty / Error / Defer
//	Flux.create(FluxSink)            Create(func(ctx, Sink[T]) error)
//	Flux.from(Publisher)             FromObservable (rxgo), FromChannel
//	map / filter                     Map / Filter
//	take / skip / takeUntil          Take / Skip / TakeUntil
//	doOnNext / doOnError             DoOnNext / DoOnError
//	doOnComplete / doFinally         DoOnComplete / DoFinally
//	onErrorResume                    OnErrorResume
//	buffer(n) / reduce / scan        Buffer / Reduce / Scan
//	concatMap (prefetch 0)           ConcatMap
//	flatMap(f, concurrency)          FlatMap
//	switchMap                        SwitchMap
//	Flux.merge / mergeDelayError     Merge / MergeDelayError
//	Flux.concat / concatDelayError   Concat / ConcatDelayError
//	Flux.zip(a, b, combinator)       Zip(a, b, fn)
//	Flux.combineLatest(a, b, comb.)  CombineLatest(a, b, fn)
//	retry(n)                         Retry(n)
//	onErrorReturn / onErrorMap       OnErrorReturn / OnErrorMap
//	onErrorContinue                  OnErrorContinue[T, U]
//	distinct / distinct(key)         Distinct / DistinctBy
//	distinctUntilChanged(key)        DistinctUntilChanged(By)
//	defaultIfEmpty / switchIfEmpty   DefaultIfEmpty / SwitchIfEmpty
//	Flux.using                       Using
//	limitRate(n)                     LimitRate(n)
//	groupBy(key, prefetch)           GroupBy(f, key, groups, WithGroupBuffer(n))
//	groupBy(key) by any key          GroupByKey(f, key, maxGroups), KeyedFlux
//	flatMapSequential(f, c, prefetch)
//	                                 FlatMapSequential(f, fn, c, prefetch)
//	concatMapEager (RxJava)          FlatMapSequential
//	Flux.mergeSequential             MergeSequential
//	Mono<T>                          Mono[T]; m.Flux() is it as a Flux
//	Mono.just / empty / error        MonoJust / MonoEmpty / MonoError
//	Mono.fromCallable                MonoFromFunc(func() (T, error))
//	Mono map / flatMap / flatMapMany MonoMap / MonoFlatMap / MonoFlatMapMany
//	Mono.zip(a, b, combinator)       MonoZip(a, b, fn)
//	then(Mono) / thenReturn(v)       Then(f, m) / ThenReturn(f, v)
//	Mono defaultIfEmpty / timeout    m.DefaultIfEmpty / m.Timeout / m.Retry(n)
//	block() / blockOptional()        m.Block(ctx) (v, ok, err)
//	next / last / single             Next / Last / Single (ErrNoSuchElement)
//	elementAt(i) / count             ElementAt(i) / Count
//	collectList / collectMap         CollectList / CollectMap
//	collectMultimap / collectSorted  CollectMultimap / CollectSorted(f, cmp)
//	hasElements / any / all          HasElements / Any / Every
//	ignoreElements                   IgnoreElements
//	publishOn(s, prefetch)           PublishOn(s, prefetch)
//	subscribeOn(s)                   SubscribeOn(s)
//	Flux.interval / Mono.delay       Interval / Timer
//	delayElements                    DelayElements
//	timeout(d) / (d, fallback)       Timeout / TimeoutTo
//	sample(d)                        Sample
//	bufferTimeout(n, d)              BufferTimeout
//	window(n) / windowTimeout(n, d)  Window / WindowTimeout
//	retryWhen(Retry.backoff / max)   RetryWhen(RetryBackoff / RetryMax)
//	doOnDiscard(Class, Consumer)     DoOnDiscard
//	doOnSubscribe / doOnCancel       DoOnSubscribe / DoOnCancel
//	doOnTerminate / doAfterTerminate DoOnTerminate / DoAfterTerminate
//	doOnEach(Signal<T>)              DoOnEach(func(Event[T]))
//	onBackpressureBuffer(n, strategy)
//	                                 OnBackpressureBuffer(n, BufferOverflow)
//	onBackpressureDrop / Latest      OnBackpressureDrop / OnBackpressureLatest
//	subscribe + blockLast            Subscribe
//	collectList().block()            Collect
//	toIterable / toStream            All
//	Sinks.Many, Sinks.EmitResult     ManySink, EmitResult
//	unicast().onBackpressureBuffer   NewUnicastSink(capacity)
//	multicast().onBackpressureBuffer NewMulticastSink(capacity)
//	replay().limit(n)                NewReplaySink(n, capacity)
//	tryEmitNext / emitNext           TryEmitNext / EmitNext(ctx, v)
//	DROP_OLDEST overflow strategy    WithDropOldest()
//	publish(prefetch).refCount(n)    Publish(capacity).RefCount(n)
//	share()                          Share
//	StepVerifier                     testkit.Verify
//
// More shortcuts (Reactor -> flux: deviation; Reactor cases translated):
//
//	startWith(T...) / concatWith     StartWith(vs...) / ConcatWith: as Concat; 2
//	mergeWith                        MergeWith: as Merge; 2
//	zip(a, b, c[, d], combinator)    Zip3 / Zip4: nested Zips; 10
//	zip(Iterable, combinator)        ZipN([]Flux[T]) Flux[[]T]: one type; 5
//	takeWhile / skipWhile            TakeWhile / SkipWhile: the stopping item and
//	                                 the skipped ones discarded; 12
//	takeLast(n) / skipLast(n)        TakeLast / SkipLast: the dropped items
//	                                 discarded; 12
//	repeat(n) / repeat(n, supplier)  Repeat(n) / RepeatWhen(RepeatSpec{OnlyIf});
//	                                 no repeat() (Repeat(math.MaxInt)); 16
//	repeatWhen(RepeatSpec)           RepeatWhen(RepeatSpec), RepeatTimes,
//	                                 RepeatFixedDelay: a backoff/v5 BackOff, no
//	                                 companion Flux; 4
//	replay(n) / autoConnect(n)       Replay(n) / AutoConnect(n): bounded lag; the
//	                                 last subscriber to leave a running upstream
//	                                 cancels it; 6
//	cache(n)                         Cache(n): no unbounded cache(); 4
//	sampleTimeout(v -> delay(d))     Debounce(d): the superseded items discarded; 5
//	buffer(Duration)                 BufferDuration(d): no empty slice; 1
//	bufferUntil(p[, cutBefore])      BufferUntil(f, p, cutBefore); 7
//	bufferWhile(p)                   BufferWhile(f, p); the ending item discarded; 6
//	elapsed() / timestamp()          Elapsed / Timestamp: ElapsedValue,
//	                                 TimestampedValue, by time.Now; 2
//
// The table's rows, and where flux deliberately differs from Reactor, are
// in docs/from-reactor-and-wow.md. In short:
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
// (v, ok, err). SwitchMap over a synchronous upstream usually keeps only
// the last inner; use ConcatMap there. ConcatMap always has prefetch 0.
// PublishOn's drain yields its goroutine after each batch, so pipelines
// sharing a scheduler are served fairly. DoFinally runs just before the
// terminal signal reaches the operators after it (a terminal signal is the
// return of a subscribe call).
package flux
