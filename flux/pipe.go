package flux

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// pipe is the bounded queue between one producer (GroupBy's router, or the
// upstream of PublishOn) and one consumer (a group subscriber, or PublishOn's
// drain task): a mutex, a ring and two one-slot wake channels. A Go channel
// would do for the hand-off but not for fusion: the consumer keeps the slot
// of the item it is delivering until the delivery returned (take with
// release), so a pipe of capacity n holds at most n pulled-but-unfinished
// items, the one in flight included.
type pipe[T any] struct {
	mu      sync.Mutex
	ring    []T
	head, n int
	limit   int   // the capacity: len(ring) until GroupBy grants a waiting group more
	busy    bool  // ring[head] is being delivered and keeps its slot
	ended   bool  // the producer terminated with err (nil: completion)
	gone    bool  // cancelled: err is the reason, queued items were discarded
	err     error // terminal signal or cancellation reason
	claimed bool  // a consumer subscribed (groups are unicast)
	idle    bool  // the consumer found the ring empty and waits for notify
	full    bool  // the producer waits on space for a free slot
	notify  func()
	wake    chan struct{} // notify of a blocking consumer
	space   chan struct{}
	dead    <-chan struct{} // closed once no consumer can run any more; nil: never
	discard func(T, error)
	key     int             // the group's key (GroupBy), its place for GroupByKey
	tag     any             // GroupByKey's key; nil for GroupBy
	board   *board[T]       // the GroupBy subscription of a group; nil for PublishOn's queue
	handed  bool            // handed downstream and not cancelled; guarded by board.mu
	ctx     context.Context // the consumer's, from claim
}

// label is the group's key as error messages show it.
func (p *pipe[T]) label() string {
	if p.tag != nil {
		return fmt.Sprint(p.tag)
	}
	return strconv.Itoa(p.key)
}

type pollState uint8

const (
	pollItem  pollState = iota // an item to deliver; its slot is held
	pollEmpty                  // nothing yet; notify will be called
	pollEnd                    // terminal signal (or cancellation) in err
)

// errGone is push's answer when the consumer cancelled: the item was not
// taken, and the caller decides what becomes of it.
var errGone = errors.New("flux: queue cancelled")

// errDead is push's answer when dead closed while it waited for room: the
// consumer will never free a slot, the item was not taken.
var errDead = errors.New("flux: queue consumer dead")

func newPipe[T any](capacity int, discard func(T, error)) *pipe[T] {
	return &pipe[T]{
		ring:    make([]T, capacity),
		limit:   capacity,
		space:   make(chan struct{}, 1),
		discard: discard,
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// claim registers the only consumer, subscribed with ctx. notify (nil:
// wake a blocking consumer) is called, never under the lock, after idle was
// seen by the producer.
func (p *pipe[T]) claim(notify func(), ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.claimed {
		return fmt.Errorf("flux: GroupBy: second subscription to a group: %w", ErrUnicastGroup)
	}
	p.claimed, p.ctx = true, ctx
	if notify == nil {
		p.wake = make(chan struct{}, 1)
		notify = func() { signal(p.wake) }
	}
	p.notify = notify
	return nil
}

// push appends v, blocking while the ring is full. It returns errGone
// (v not taken) once the consumer cancelled, errDead (v not taken) if dead
// closes while it waits, or the cause of ctx (v passed to the discard hook)
// if ctx ends while it waits.
func (p *pipe[T]) push(ctx context.Context, v T) error {
	p.mu.Lock()
	for !p.gone && p.n == p.limit {
		p.full = true
		watch := p.board != nil && !p.claimed
		p.mu.Unlock()
		if err := p.waitSpace(ctx, watch); err != nil {
			if err != errDead {
				p.discard(v, err)
			}
			return err
		}
		p.mu.Lock()
	}
	if p.gone {
		p.mu.Unlock()
		return errGone
	}
	if p.n == len(p.ring) {
		p.growLocked()
	}
	i := p.head + p.n
	if i >= len(p.ring) {
		i -= len(p.ring)
	}
	p.ring[i] = v
	p.n++
	wake := p.unidleLocked()
	p.mu.Unlock()
	if wake {
		p.notify()
	}
	return nil
}

// growLocked doubles the ring, up to limit at least, keeping the order (the
// head, maybe in delivery, moves to index 0). Called with the lock held.
func (p *pipe[T]) growLocked() {
	ring := make([]T, max(p.limit, 2*len(p.ring)))
	for k := range p.n {
		ring[k] = p.ring[(p.head+k)%len(p.ring)]
	}
	p.ring, p.head = ring, 0
}

// unidleLocked clears the idle flag, telling whether the consumer was
// waiting (and must be notified). Called with the lock held.
func (p *pipe[T]) unidleLocked() bool {
	if !p.idle {
		return false
	}
	p.idle = false
	if p.board != nil {
		p.board.idle.Add(-1)
	}
	return true
}

// waitSpace waits for a slot to be freed (nil), dead to close (errDead) or
// ctx to end (its cause). watch: the pipe is a group nobody subscribed,
// which GroupBy checks for a stall while the router waits.
func (p *pipe[T]) waitSpace(ctx context.Context, watch bool) error {
	if watch {
		p.board.routerWaits(p)
		defer p.board.routerWaits(nil)
	}
	select {
	case <-p.space:
		return nil
	case <-p.dead:
		return errDead
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// terminate records the producer's end; buffered items are still delivered
// before it. No effect on a cancelled or already terminated pipe.
func (p *pipe[T]) terminate(err error) {
	p.mu.Lock()
	if p.gone || p.ended {
		p.mu.Unlock()
		return
	}
	p.ended, p.err = true, err
	wake := p.unidleLocked()
	p.mu.Unlock()
	if wake {
		p.notify()
	}
}

// reason is the cancellation reason once push returned errGone.
func (p *pipe[T]) reason() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// take releases the slot of the item delivered last (release) and returns
// the next item, pollEnd, or pollEmpty after which the consumer is idle until
// notify. Only the consumer calls it.
func (p *pipe[T]) take(release bool) (v T, st pollState, err error) {
	p.mu.Lock()
	room := release && p.pop()
	switch {
	case p.gone || p.n == 0 && p.ended:
		st, err = pollEnd, p.err
	case p.n > 0:
		p.busy = true
		v = p.ring[p.head]
	default:
		p.idle = true
		st = pollEmpty
		if p.board != nil {
			p.board.idle.Add(1)
		}
	}
	p.mu.Unlock()
	if room {
		signal(p.space)
	}
	if st == pollEmpty && p.board != nil {
		p.board.openGate() // the router may go on
		p.board.consumerWaits()
	}
	return v, st, err
}

// release frees the slot of the item delivered last.
func (p *pipe[T]) release() {
	p.mu.Lock()
	room := p.busy && p.pop()
	p.mu.Unlock()
	if room {
		signal(p.space)
	}
}

// pop frees the slot of the delivered head; it reports whether the producer
// waits for room. Called with the lock held.
func (p *pipe[T]) pop() bool {
	var zero T
	p.ring[p.head] = zero
	p.head++
	if p.head == len(p.ring) {
		p.head = 0
	}
	p.n--
	p.busy = false
	full := p.full
	p.full = false
	return full
}

// cancel ends the pipe with reason: queued items go to the discard hook,
// except the one in delivery, which is released if the consumer itself
// cancels after delivering it (release) and otherwise left to the consumer.
// The producer and an idle consumer are woken. Idempotent.
func (p *pipe[T]) cancel(reason error, release bool) {
	p.mu.Lock()
	room := release && p.busy && p.pop()
	if p.gone {
		p.mu.Unlock()
		if room {
			signal(p.space)
		}
		return
	}
	p.gone, p.err = true, reason
	keep := 0
	if p.busy {
		keep = 1
	}
	var dropped []T
	if p.n > keep {
		dropped = make([]T, 0, p.n-keep)
	}
	var zero T
	for k := keep; k < p.n; k++ {
		i := (p.head + k) % len(p.ring)
		dropped = append(dropped, p.ring[i])
		p.ring[i] = zero
	}
	p.n = keep
	wake := p.unidleLocked()
	room = room || p.full
	p.full = false
	p.mu.Unlock()
	if p.board != nil {
		p.board.cancelled(p) // before the router learns of it
	}
	if room {
		signal(p.space)
	}
	if wake {
		p.notify()
	}
	for _, v := range dropped {
		p.discard(v, reason)
	}
}

// abandon is for a subscriber that fails before it could consume: it claims
// the pipe and cancels it with reason, discarding what is queued. A pipe
// already claimed by another subscriber is left alone.
func (p *pipe[T]) abandon(reason error) {
	if p.claim(func() {}, nil) == nil {
		p.cancel(reason, false)
	}
}

// consume delivers the pipe to emit on the calling goroutine: the group
// flux of GroupBy when not fused with PublishOn.
func (p *pipe[T]) consume(ctx context.Context, emit func(T) error) error {
	if err := p.claim(nil, ctx); err != nil {
		return err
	}
	release := false
	for {
		if err := ctxDone(ctx); err != nil {
			p.cancel(err, release)
			return err
		}
		v, st, err := p.take(release)
		release = false
		switch st {
		case pollEnd:
			return err
		case pollEmpty:
			select {
			case <-p.wake:
			case <-ctx.Done():
				err := context.Cause(ctx)
				p.cancel(err, false)
				return err
			}
		case pollItem:
			if err := emit(v); err != nil {
				p.cancel(err, true)
				return err
			}
			release = true
		}
	}
}
