package flux

import (
	"context"
	"sync"

	"github.com/aggflow/aggflow/component"
)

// DefaultPublishBuffer is the capacity Share gives its connections, in
// items.
const DefaultPublishBuffer = 256

// ConnectableFlux is a cold Flux made ready to be shared by the subscribers
// of one connection to it (Publish), with a history replayed to late
// subscribers (Replay). It is a recipe: each RefCount or AutoConnect made
// from it has connections of its own. There is no Connect: a connection
// runs its upstream on a goroutine, and RefCount and AutoConnect give that
// goroutine an owner who joins it.
type ConnectableFlux[T any] struct {
	source   Flux[T]
	capacity int
	history  int  // Replay's
	replay   bool // made by Replay
}

// Replay returns f ready to be shared with a history: a subscriber that
// joins a connection first gets the last history items the upstream
// emitted in it (fewer if fewer were), then the live ones, through a
// replay sink (NewReplaySink) of history+DefaultPublishBuffer slots, so
// each subscriber may lag by DefaultPublishBuffer items behind the newest
// beyond the history. Memory: that many slots of T per connection.
// history < 1 makes the Flux of RefCount and AutoConnect fail with
// ErrInvalidArgument.
func (f Flux[T]) Replay(history int) ConnectableFlux[T] {
	return ConnectableFlux[T]{source: f, capacity: history + DefaultPublishBuffer, history: history, replay: true}
}

// Cache is Replay(history).AutoConnect(1): the first subscriber connects
// the upstream; once the upstream ended, every later subscriber gets its
// last history items and its terminal signal without subscribing it again.
// history < 1 gives ErrInvalidArgument.
func (f Flux[T]) Cache(history int) Flux[T] {
	if history < 1 {
		return Error[T](invalid("Cache", "history below 1"))
	}
	return f.Replay(history).AutoConnect(1)
}

// Publish returns f ready to be shared through a buffer of capacity items
// per connection (each subscriber may lag by that much behind the fastest).
// capacity < 1 makes the Flux of RefCount fail with ErrInvalidArgument.
func (f Flux[T]) Publish(capacity int) ConnectableFlux[T] {
	return ConnectableFlux[T]{source: f, capacity: capacity}
}

// Share is Publish(DefaultPublishBuffer).RefCount(1).
func (f Flux[T]) Share() Flux[T] { return f.Publish(DefaultPublishBuffer).RefCount(1) }

// RefCount returns a hot Flux over c. The subscribers gather in a
// connection; when the n-th arrives, the upstream is subscribed, once, on a
// goroutine of the connection, and its items go to every subscriber
// present, each from the item emitted after it joined (subscribers waiting
// for the n-th get all of them) through a multicast buffer of the Publish
// capacity: the upstream waits for the slowest subscriber. The upstream's
// terminal signal reaches every subscriber after its items; the next
// subscriber then opens a new connection, which subscribes the upstream
// again once n have gathered.
//
// When the last subscriber leaves early (its ctx ended, its downstream
// failed), the upstream's context is cancelled with ErrCancelled, the items
// buffered for that subscriber go to its discard hook with its reason, and
// its Subscribe returns only once the upstream's goroutine has exited. That
// goroutine is the one this package starts that the call starting it (the
// n-th Subscribe) does not join: the last subscriber of the connection to
// leave joins it, whichever that is, so none is left running once every
// Subscribe of a connection has returned.
//
// The upstream runs with the values of the n-th subscriber's context (its
// discard hooks included), not its cancellation; an item the upstream emits
// after the connection was cancelled goes to that context's discard hook. A
// panic or runtime.Goexit in the upstream fails every subscriber with
// *PanicError. n < 1 gives ErrInvalidArgument. The returned Flux carries the
// connection state: share the value, do not rebuild it per subscriber.
func (c ConnectableFlux[T]) RefCount(n int) Flux[T] { return c.connectAt("RefCount", n, false) }

// AutoConnect returns a hot Flux over c that connects as RefCount does,
// when the n-th subscriber arrives, and keeps the connection once the
// upstream ended: every later subscriber gets what the connection still
// holds (with Replay, the last history items), then the upstream's
// terminal signal, and the upstream is never subscribed again. While the
// upstream runs, the connection is owned as RefCount's is: when its last
// subscriber leaves, the upstream is cancelled with ErrCancelled and
// joined before that Subscribe returns, and the next subscriber opens a
// new connection. n < 1 gives ErrInvalidArgument. The returned Flux
// carries the connection state: share the value, do not rebuild it per
// subscriber.
func (c ConnectableFlux[T]) AutoConnect(n int) Flux[T] { return c.connectAt("AutoConnect", n, true) }

// connectAt is RefCount and AutoConnect (keep: a connection whose
// upstream ended stays for the subscribers after).
func (c ConnectableFlux[T]) connectAt(op string, n int, keep bool) Flux[T] {
	switch {
	case c.replay && c.history < 1:
		return Error[T](invalid("Replay", "history below 1"))
	case c.capacity < 1:
		return Error[T](invalid("Publish", "capacity below 1"))
	case n < 1:
		return Error[T](invalid(op, "subscriber count below 1"))
	}
	r := &refCount[T]{source: c.source, capacity: c.capacity, history: c.history, n: n, keep: keep}
	return Flux[T]{subscribe: r.subscribe}
}

type refCount[T any] struct {
	source   Flux[T]
	capacity int
	history  int // a replay sink's limit; 0: a multicast sink
	n        int
	keep     bool // AutoConnect

	mu   sync.Mutex
	conn *connection[T] // the connection new subscribers join; nil: none yet
}

// connection is one subscription of the upstream shared by its subscribers.
type connection[T any] struct {
	hub     *ManySink[T]
	count   int  // subscribers attached; guarded by refCount.mu
	started bool // the upstream goroutine was started; guarded by refCount.mu
	kept    bool // AutoConnect's, ended and kept; guarded by refCount.mu
	stop    context.CancelCauseFunc
	done    chan struct{} // closed when the upstream goroutine exits
}

func (r *refCount[T]) subscribe(ctx context.Context, emit func(T) error) (err error) {
	c, sub := r.join(ctx)
	// Left on every exit, a runtime.Goexit of the downstream included (with
	// the Goexit's error then), so that the upstream is cancelled and joined
	// once the last subscriber is gone.
	err = component.Call(func() error { return c.hub.drain(ctx, sub, emit) }, func(p *component.PanicError) {
		r.leave(c, sub, exitedAs("RefCount", p))
	})
	r.leave(c, sub, err)
	return err
}

// join attaches a subscriber to the current connection, opening one if
// there is none, and starts the upstream when it is the n-th.
func (r *refCount[T]) join(ctx context.Context) (*connection[T], *sinkSub[T]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conn
	if c == nil {
		// capacity and history were checked by connectAt, and a multicast
		// or replay sink never refuses a subscriber.
		kind := multicastKind
		if r.history > 0 {
			kind = replayKind
		}
		hub, _ := newManySink[T](kind, r.capacity, r.history, nil)
		c = &connection[T]{hub: hub, done: make(chan struct{})}
		r.conn = c
	}
	sub, _ := c.hub.attach(ctx)
	c.count++
	if c.count == r.n && !c.started {
		c.started = true
		uctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
		c.stop = stop
		component.Go(func() error { return r.connect(uctx, c) }, func(err error) { r.connected(uctx, c, err) })
	}
	return c, sub
}

// connect runs the upstream into the connection's buffer, on the
// connection's goroutine; connected ends it.
func (r *refCount[T]) connect(ctx context.Context, c *connection[T]) error {
	discard := discarder[T](ctx)
	return runCaught(r.source, ctx, func(v T) error {
		if c.hub.EmitNext(ctx, v) == EmitOK {
			return nil
		}
		err := ctxDone(ctx)
		if err == nil {
			err = ErrCancelled
		}
		discard(v, err)
		return err
	})
}

// connected terminates the buffer with the upstream's signal unless the
// connection was cancelled first; a runtime.Goexit in the upstream is
// answered before the goroutine dies.
func (r *refCount[T]) connected(ctx context.Context, c *connection[T], err error) {
	defer close(c.done)
	if isGoexit(err) {
		r.end(c, exitedAs("RefCount", err))
	} else if ctx.Err() == nil {
		r.end(c, err)
	}
}

// end closes the connection to newcomers, or keeps it for them
// (AutoConnect), then delivers the upstream's terminal signal to the
// subscribers it has.
func (r *refCount[T]) end(c *connection[T], err error) {
	r.mu.Lock()
	if r.conn == c {
		if r.keep {
			c.kept = true
		} else {
			r.conn = nil
		}
	}
	r.mu.Unlock()
	c.hub.terminate(err)
}

// leave detaches a subscriber that ended with reason. The last one cancels
// the connection and joins its goroutine.
func (r *refCount[T]) leave(c *connection[T], sub *sinkSub[T], reason error) {
	r.mu.Lock()
	c.count--
	last := c.count == 0 && !c.kept // a kept connection has no upstream to stop
	if last && r.conn == c {
		r.conn = nil
	}
	started := c.started
	r.mu.Unlock()
	if !last {
		c.hub.detach(sub, reason, false)
		return
	}
	if started {
		c.stop(ErrCancelled) // first, so that the upstream's refused item has a reason
	}
	c.hub.detach(sub, reason, true)
	if started {
		<-c.done
	}
}
