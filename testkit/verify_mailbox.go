package testkit

import (
	"errors"
	"fmt"
	"sync"
)

type eventKind uint8

const (
	evSubscribe eventKind = iota
	evNext
	evEnd
)

// event is one signal of the subscription, as the script sees it.
type event[T any] struct {
	kind  eventKind
	index int // evNext: the items before it; evEnd: all the items
	item  T
	err   error      // evEnd: what Subscribe returned
	reply chan error // evNext whose emitter waits for the verdict; nil once given
}

func (ev *event[T]) String() string {
	switch {
	case ev.kind == evNext:
		return fmt.Sprintf("onNext(%#v)", ev.item)
	case ev.err == nil:
		return "onComplete"
	}
	return fmt.Sprintf("onError(%v)", ev.err)
}

// acceptAll is the accept limit that takes every item at once.
const acceptAll = -1

// awaitBacklog is how many items a ThenAwait takes at once; an emitter
// beyond it waits for the script (backpressure), so that an endless
// synchronous Flux cannot keep a synctest bubble's clock from moving.
const awaitBacklog = 256

// errAfterEnd answers an item emitted after the subscription returned.
var errAfterEnd = errors.New("testkit: item after the end of the flow")

// mailbox hands the signals of one subscription to the script. Each emit
// is appended to the backlog and, unless the script is accepting items
// (during an action or a wait), waits until the script has matched it:
// the subscriber is as slow as the script, so nothing is pulled ahead.
// Emits are serial by the flux contract, so at most one waits at a time.
// Nothing blocks on mu while waiting: every wait is on a channel, which a
// synctest bubble sees as durably blocked.
type mailbox[T any] struct {
	wake chan struct{} // capacity 1: the backlog grew

	mu       sync.Mutex
	backlog  []*event[T] // the signals not yet consumed: backlog[head:]
	head     int
	items    int        // items emitted so far
	accept   int        // 0: each emit waits; acceptAll; else the backlog taken at once
	owed     chan error // the verdict of the last item matched, not yet given
	refusal  error      // non-nil: emits are answered with it at once
	refused  bool       // an emit was answered with an error
	ended    bool
	misplace []T // items emitted after a refusal or after the end
	discards []T
}

func newMailbox[T any]() *mailbox[T] {
	return &mailbox[T]{wake: make(chan struct{}, 1)}
}

// pushLocked appends ev and wakes the script.
func (m *mailbox[T]) pushLocked(ev *event[T]) {
	m.backlog = append(m.backlog, ev)
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// subscribed is called by the subscription when it starts.
func (m *mailbox[T]) subscribed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pushLocked(&event[T]{kind: evSubscribe})
}

// end is called with what Subscribe returned.
func (m *mailbox[T]) end(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = true
	m.pushLocked(&event[T]{kind: evEnd, index: m.items, err: err})
}

// discard is the flux.DoOnDiscard hook of the subscription.
func (m *mailbox[T]) discard(v T, _ error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.discards = append(m.discards, v)
}

// emit is the subscriber's onNext.
func (m *mailbox[T]) emit(x T) error {
	m.mu.Lock()
	if m.ended || m.refused {
		// The flux broke its contract: it went on after being told to stop.
		m.misplace = append(m.misplace, x)
		err := m.refusal
		m.mu.Unlock()
		if err == nil {
			err = errAfterEnd
		}
		return err
	}
	if m.refusal != nil {
		m.refused = true
		m.mu.Unlock()
		return m.refusal
	}
	ev := &event[T]{kind: evNext, index: m.items, item: x}
	m.items++
	if m.accept == 0 || m.accept > 0 && len(m.backlog)-m.head >= m.accept {
		ev.reply = make(chan error, 1)
	}
	reply := ev.reply
	m.pushLocked(ev)
	m.mu.Unlock()
	if reply == nil {
		return nil
	}
	err := <-reply
	if err != nil {
		m.mu.Lock()
		m.refused = true
		m.mu.Unlock()
	}
	return err
}

// emitted returns how many items the Flux has emitted.
func (m *mailbox[T]) emitted() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items
}

// front returns the oldest signal not yet consumed, or nil.
func (m *mailbox[T]) front() *event[T] {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.head == len(m.backlog) {
		return nil
	}
	return m.backlog[m.head]
}

// pop consumes the oldest signal and returns it; its verdict, if its
// emitter waits, is owed until the script needs the flux to move on
// (settle) or stops it.
func (m *mailbox[T]) pop() *event[T] {
	m.mu.Lock()
	defer m.mu.Unlock()
	ev := m.backlog[m.head]
	m.backlog[m.head] = nil
	if m.head++; m.head == len(m.backlog) { // reuse the array from its start
		m.backlog, m.head = m.backlog[:0], 0
	}
	if ev.reply != nil {
		m.owed, ev.reply = ev.reply, nil
	}
	return ev
}

// settle gives the owed verdict, if any.
func (m *mailbox[T]) settle(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settleLocked(err)
}

func (m *mailbox[T]) settleLocked(err error) {
	if m.owed != nil {
		m.owed <- err
		m.owed = nil
	}
}

// answerLocked gives err to the owed verdict and to every emitter waiting.
func (m *mailbox[T]) answerLocked(err error) {
	m.settleLocked(err)
	for _, ev := range m.backlog[m.head:] {
		if ev.reply != nil {
			ev.reply <- err
			ev.reply = nil
		}
	}
}

// setAccept sets how many items are taken without waiting for the script
// (0: none); a non-zero limit also releases the emitter waiting now, whose
// item the steps after the action or the wait will match.
func (m *mailbox[T]) setAccept(limit int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accept = limit
	if limit != 0 {
		m.answerLocked(nil)
	}
}

// refuse answers every waiting emitter and every later one with err (the
// first refusal stays).
func (m *mailbox[T]) refuse(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refusal == nil {
		m.refusal = err
	}
	m.answerLocked(m.refusal)
}

// refusing reports whether the script has stopped taking items.
func (m *mailbox[T]) refusing() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refusal != nil
}

// broken returns the error of a Flux that emitted after it was refused an
// item or after its subscription returned, or nil.
func (m *mailbox[T]) broken() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.misplace) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the flow emitted %#v after it was told to stop or had ended", ErrExpectation, m.misplace)
}

// endSeen returns the end of the flow if it is among the signals not yet
// consumed, or nil.
func (m *mailbox[T]) endSeen() *event[T] {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range m.backlog[m.head:] {
		if ev.kind == evEnd {
			return ev
		}
	}
	return nil
}
