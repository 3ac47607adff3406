package flux_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aggflow/aggflow/flux"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// sinkModel is the specification of a ManySink over the items 0, 1, 2, ...
// in emission order, with subscribers whose onNext waits for a token after
// recording each item (subscriber with gated). Positions are indexes of
// emitted items; head is the oldest one the sink still holds.
type sinkModel struct {
	kind              string // "unicast", "multicast", "replay"
	capacity, limit   int
	drop              bool
	tail, head        int
	subs              []*modelSub // attached
	claimed, canceled bool
	done              bool
	signal            error // the terminal signal once done
}

type modelSub struct {
	next     int // position of the next item to take
	blocked  bool
	tokens   int
	got      []int
	dropped  []int
	end      error // what Subscribe returned
	returned bool
}

// floor is the lowest position the sink must keep, the replay window
// measured from end.
func (m *sinkModel) floor(end int) int {
	if len(m.subs) == 0 && m.kind != "replay" {
		return m.head
	}
	f := end
	for _, s := range m.subs {
		f = min(f, s.next)
	}
	if m.kind == "replay" {
		f = min(f, max(0, end-m.limit))
	}
	return max(f, m.head)
}

func (m *sinkModel) emit() flux.EmitResult {
	switch {
	case m.done:
		return flux.EmitFailTerminated
	case m.canceled:
		return flux.EmitFailCancelled
	}
	if m.kind == "replay" {
		m.head = m.floor(m.tail + 1)
	}
	if m.tail-m.head == m.capacity {
		switch {
		case len(m.subs) == 0:
			return flux.EmitFailZeroSubscriber
		case !m.drop:
			return flux.EmitFailOverflow
		}
		for _, s := range m.subs {
			if s.next == m.head {
				s.dropped = append(s.dropped, s.next)
				s.next++
			}
		}
		m.head = m.floor(m.tail + 1)
	}
	m.tail++
	m.settle()
	return flux.EmitOK
}

func (m *sinkModel) terminate(err error) flux.EmitResult {
	switch {
	case m.done:
		return flux.EmitFailTerminated
	case m.canceled:
		return flux.EmitFailCancelled
	}
	m.done, m.signal = true, err
	m.settle()
	return flux.EmitOK
}

// subscribe attaches a subscriber, or refuses a second one to a unicast sink.
func (m *sinkModel) subscribe() *modelSub {
	s := &modelSub{}
	if m.kind == "unicast" && m.claimed {
		s.returned, s.end = true, flux.ErrUnicastSink
		return s
	}
	m.claimed = true
	switch {
	case m.kind == "replay":
		s.next = max(m.head, m.tail-min(m.tail, m.limit))
	case m.kind == "multicast" && len(m.subs) > 0:
		s.next = m.tail
	default:
		s.next = m.head
	}
	m.subs = append(m.subs, s)
	m.settle()
	return s
}

// leave detaches s, which returned end.
func (m *sinkModel) leave(s *modelSub, end error) {
	m.subs = slices.DeleteFunc(m.subs, func(o *modelSub) bool { return o == s })
	s.returned, s.end = true, end
	if m.kind == "unicast" && !(m.done && s.next == m.tail) {
		for p := s.next; p < m.tail; p++ {
			s.dropped = append(s.dropped, p)
		}
		m.head, m.canceled = m.tail, true
		return
	}
	m.head = m.floor(m.tail)
}

func (m *sinkModel) allow(s *modelSub, n int) {
	s.tokens += n
	m.settle()
}

func (m *sinkModel) cancel(s *modelSub) {
	if !s.returned {
		m.leave(s, errLeave)
	}
}

// settle runs every subscriber as far as its tokens let it.
func (m *sinkModel) settle() {
	for _, s := range slices.Clone(m.subs) {
		for {
			if s.blocked {
				if s.tokens == 0 {
					break
				}
				s.tokens--
				s.blocked = false
			}
			if s.next < m.tail {
				s.got = append(s.got, s.next)
				s.next++
				m.head = m.floor(m.tail)
				s.blocked = true
				continue
			}
			if m.done {
				m.leave(s, m.signal)
			}
			break
		}
	}
}

// sinkOp is one step of a property run.
type sinkOp struct {
	kind string // "emit", "emitWait", "subscribe", "allow", "cancel", "complete", "error"
	sub  int    // which subscriber (modulo their number)
	n    int    // tokens for allow
}

func drawSinkOps(rt *rapid.T) []sinkOp {
	kinds := []string{"emit", "emit", "emit", "emitWait", "subscribe", "allow", "allow", "cancel", "complete", "error"}
	n := rapid.IntRange(0, 40).Draw(rt, "steps")
	ops := make([]sinkOp, n)
	for i := range ops {
		ops[i] = sinkOp{
			kind: rapid.SampledFrom(kinds).Draw(rt, "op"),
			sub:  rapid.IntRange(0, 7).Draw(rt, "sub"),
			n:    rapid.IntRange(1, 4).Draw(rt, "tokens"),
		}
	}
	return ops
}

// The sinks agree with sinkModel, step by step: every Emit call's result,
// and for every subscriber the items it got (so each sees a contiguous,
// in-order run of the emitted sequence starting where it subscribed: the
// next item for a multicast subscriber joining others, the last limit for a
// replay one; gaps only where WithDropOldest dropped for it), the items
// dropped for it, and what its Subscribe returned.
func TestSinkModelProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &sinkModel{
			kind:     rapid.SampledFrom([]string{"unicast", "multicast", "replay"}).Draw(rt, "kind"),
			capacity: rapid.IntRange(1, 4).Draw(rt, "capacity"),
			drop:     rapid.Bool().Draw(rt, "drop oldest"),
		}
		if m.kind == "replay" {
			m.limit = rapid.IntRange(1, m.capacity).Draw(rt, "limit")
		}
		ops := drawSinkOps(rt)
		var want, got []string
		synctest.Test(t, func(t *testing.T) {
			want, got = runSinkModel(t, m, ops)
		})
		require.Equal(rt, want, got)
	})
}

func newModelSink(m *sinkModel) (*flux.ManySink[int], error) {
	var opts []flux.SinkOption
	if m.drop {
		opts = append(opts, flux.WithDropOldest())
	}
	switch m.kind {
	case "unicast":
		return flux.NewUnicastSink[int](m.capacity, opts...)
	case "multicast":
		return flux.NewMulticastSink[int](m.capacity, opts...)
	}
	return flux.NewReplaySink[int](m.limit, m.capacity, opts...)
}

// runSinkModel runs ops on a real sink and on m, returning both traces.
func runSinkModel(t *testing.T, m *sinkModel, ops []sinkOp) (want, got []string) {
	s, err := newModelSink(m)
	require.NoError(t, err)
	var subs []*subscriber[int]
	var models []*modelSub
	step := func(op string, w, g any) {
		want = append(want, fmt.Sprint(op, ": ", w))
		got = append(got, fmt.Sprint(op, ": ", g))
	}
	for _, op := range ops {
		switch op.kind {
		case "emit":
			v := m.tail
			step(op.kind, m.emit(), s.TryEmitNext(v))
		case "emitWait":
			v := m.tail
			r := m.emit()
			if r == flux.EmitFailOverflow || r == flux.EmitFailZeroSubscriber {
				r = flux.EmitFailContext // nothing makes room while it waits
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			step(op.kind, r, s.EmitNext(ctx, v))
			cancel()
		case "subscribe":
			models = append(models, m.subscribe())
			subs = append(subs, subscribe(t.Context(), s.AsFlux(), true))
		case "allow":
			if len(subs) > 0 {
				i := op.sub % len(subs)
				m.allow(models[i], op.n)
				subs[i].allow(op.n)
			}
		case "cancel":
			if len(subs) > 0 {
				i := op.sub % len(subs)
				m.cancel(models[i])
				subs[i].cancel(errLeave)
			}
		case "complete":
			step(op.kind, m.terminate(nil), s.TryEmitComplete())
		case "error":
			step(op.kind, m.terminate(errBoom), s.TryEmitError(errBoom))
		}
		synctest.Wait()
	}
	step("final complete", m.terminate(nil), s.TryEmitComplete())
	for i, sub := range subs {
		m.allow(models[i], 1<<20)
		close(sub.gate)
		items, err := sub.wait()
		step(fmt.Sprint("subscriber ", i), describeSub(models[i].got, models[i].dropped, models[i].end),
			describeSub(items, sub.drops(), err))
	}
	return want, got
}

// describeSub names a subscriber's end by the sentinel it wraps.
func describeSub(items, dropped []int, end error) string {
	name := "nil"
	for _, e := range []error{errBoom, errLeave, flux.ErrUnicastSink} {
		if errors.Is(end, e) {
			name = e.Error()
		}
	}
	if end != nil && name == "nil" {
		name = "unexpected: " + end.Error()
	}
	return fmt.Sprintf("got %v dropped %v end %s", items, dropped, name)
}

// Emitters on many goroutines at once: every emission is counted exactly
// once as delivered or refused, every subscriber gets every delivered item
// once, all subscribers see the same order, and each emitter's items keep
// their order.
func TestSinkConcurrentEmitters(t *testing.T) {
	const emitters, perEmitter, subscribers = 8, 500, 3
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprint("EmitNext=", wait), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := must(flux.NewMulticastSink[int](8))(t)
				subs := make([]*subscriber[int], subscribers)
				for i := range subs {
					subs[i] = subscribe(t.Context(), s.AsFlux(), false)
				}
				synctest.Wait()
				var ok, refused atomic.Int64
				var wg sync.WaitGroup
				for e := range emitters {
					wg.Go(func() {
						for i := range perEmitter {
							v := e*perEmitter + i
							var r flux.EmitResult
							if wait {
								r = s.EmitNext(t.Context(), v)
							} else {
								r = s.TryEmitNext(v)
							}
							switch r {
							case flux.EmitOK:
								ok.Add(1)
							case flux.EmitFailOverflow:
								refused.Add(1)
							default:
								t.Errorf("emit %d: %v", v, r)
							}
						}
					})
				}
				wg.Wait()
				require.Equal(t, flux.EmitOK, s.TryEmitComplete())
				require.Equal(t, int64(emitters*perEmitter), ok.Load()+refused.Load())
				if wait {
					require.Zero(t, refused.Load())
				}
				first, err := subs[0].wait()
				require.NoError(t, err)
				require.Len(t, first, int(ok.Load()))
				last := make([]int, emitters)
				for e := range last {
					last[e] = -1
				}
				for _, v := range first {
					require.Greater(t, v, last[v/perEmitter], "order of emitter %d", v/perEmitter)
					last[v/perEmitter] = v
				}
				for _, sub := range subs[1:] {
					got, err := sub.wait()
					require.NoError(t, err)
					require.Equal(t, first, got)
				}
			})
		})
	}
}

// An EmitNext waiting for room always gets it once the subscribers take
// items: whatever the kind, capacity, window and the pace of each
// subscriber, an emitter of n items finishes and every subscriber present
// from the start gets all n in order (synctest reports a deadlock otherwise).
func TestSinkEmitNextLivenessProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &sinkModel{
			kind:     rapid.SampledFrom([]string{"unicast", "multicast", "replay"}).Draw(rt, "kind"),
			capacity: rapid.IntRange(1, 6).Draw(rt, "capacity"),
		}
		if m.kind == "replay" {
			m.limit = rapid.IntRange(1, m.capacity).Draw(rt, "limit")
		}
		n := rapid.IntRange(0, 30).Draw(rt, "items")
		subscribers := 1
		if m.kind != "unicast" {
			subscribers = rapid.IntRange(1, 3).Draw(rt, "subscribers")
		}
		paces := rapid.SliceOfN(rapid.IntRange(0, 3), 0, 20).Draw(rt, "tokens per step")
		var got [][]int
		var errs []error
		synctest.Test(t, func(t *testing.T) {
			s, err := newModelSink(m)
			require.NoError(t, err)
			subs := make([]*subscriber[int], subscribers)
			for i := range subs {
				subs[i] = subscribe(t.Context(), s.AsFlux(), true)
			}
			synctest.Wait()
			emitted := make(chan struct{})
			go func() {
				defer close(emitted)
				for i := range n {
					if r := s.EmitNext(t.Context(), i); r != flux.EmitOK {
						t.Errorf("EmitNext(%d): %v", i, r)
					}
				}
				if r := s.TryEmitComplete(); r != flux.EmitOK {
					t.Errorf("TryEmitComplete: %v", r)
				}
			}()
			for i, p := range paces {
				subs[i%len(subs)].allow(p)
				synctest.Wait()
			}
			for _, sub := range subs {
				close(sub.gate)
			}
			<-emitted
			for _, sub := range subs {
				items, err := sub.wait()
				got, errs = append(got, items), append(errs, err)
			}
		})
		for i := range got {
			require.NoError(rt, errs[i])
			require.Equal(rt, seq(n), append([]int{}, got[i]...), "subscriber %d", i)
		}
	})
}
