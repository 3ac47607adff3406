package jetstream

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/partition"
	"github.com/aggflow/aggflow/schedulers"
)

// servedLate makes one pull of a partition a pull given up before the
// server served it, and served after: once armed, the next Fetch returns at
// once with the client deadline's error and nothing received, as nats.go
// does when the deadline passes first; the server then serves that pull
// (late, on the partition's handle, so with its pin id, and what it
// delivers is dropped) before the partition's next pull reaches it, since
// the server serves a consumer's pull requests in the order they came.
// Nothing orders that late delivery with the consumer info request the
// partition may send meanwhile: the server queues pull requests and API
// requests apart, and nats.go closes a given-up pull's messages before it
// unsubscribes, so the info request can even precede the unsubscription.
type servedLate struct {
	mu    sync.Mutex
	armed bool                  // the next Fetch is given up
	serve func(natsjs.Consumer) // the late delivery, owed until the Fetch after it
}

func (s *servedLate) arm(serve func(natsjs.Consumer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.serve = true, serve
}

func (s *servedLate) wrap(cons natsjs.Consumer) natsjs.Consumer { return lateConsumer{cons, s} }

type lateConsumer struct {
	natsjs.Consumer
	s *servedLate
}

func (c lateConsumer) Fetch(n int, opts ...natsjs.FetchOpt) (natsjs.MessageBatch, error) {
	c.s.mu.Lock()
	armed, serve := c.s.armed, c.s.serve
	c.s.armed = false
	if !armed {
		c.s.serve = nil
	}
	c.s.mu.Unlock()
	if armed {
		return givenUp{}, nil
	}
	if serve != nil {
		serve(c.Consumer)
	}
	return c.Consumer.Fetch(n, opts...)
}

// givenUp is a batch that ended by the client's deadline, nothing received.
type givenUp struct{}

func (givenUp) Messages() <-chan natsjs.Msg {
	ch := make(chan natsjs.Msg)
	close(ch)
	return ch
}

func (givenUp) Error() error { return context.DeadlineExceeded }

// A delivery to a pull the partition gave up, made once the partition had
// asked the server for its count of deliveries (and found it whole), is
// still found: the partition's next pull that the server ends (its expiry's
// status, nothing delivered: the position was the partition's last) comes
// after every delivery to the pull given up, and the count taken then is
// short of the server's, so the partition resets and position 2 is
// replayed and handled. Before, the count was taken once, at the pull given
// up: found whole, and with nothing published after position 2 no skipped
// sequence ever told, so position 2 stayed unhandled (and, delivered and
// not acknowledged, was never delivered again).
func TestAPullServedAfterItWasGivenUpIsReplayed(t *testing.T) {
	expiry := pullExpiry
	pullExpiry = 300 * time.Millisecond // the partition's next pull ends soon
	t.Cleanup(func() { pullExpiry = expiry })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, topo := oneStream(t, ctx)
	sched, err := schedulers.NewParallel("s", 1)
	require.NoError(t, err)
	defer sched.Dispose()
	handled := make(chan int64, 16)
	handler := func(_ context.Context, d partition.Delivery[string]) error {
		handled <- d.Position
		return nil
	}
	late := &servedLate{}
	c, err := NewConsumer("c", Subscription{JetStream: js, Topology: topo, Owned: []int32{0}},
		aggregate.MaterializedNamedAggregate{Context: "t", Aggregate: "A"}, sched, keyCodec, handler,
		WithRacingPulls(), func(c *config) { c.wrapPulls = late.wrap })
	require.NoError(t, err)
	require.NoError(t, c.Prepare(ctx))
	require.NoError(t, c.Start())
	defer func() { require.NoError(t, c.StopGracefully(ctx)) }()

	next := func(what string) int64 {
		select {
		case pos := <-handled:
			return pos
		case <-time.After(10 * time.Second): // a bound: the replay takes a pull expiry and a reset
			t.Fatalf("%s: not handled (stats %+v)", what, c.Stats())
			return 0
		}
	}
	_, err = js.PublishMsg(ctx, topo.NewMsg("k", []byte("x")))
	require.NoError(t, err)
	require.EqualValues(t, 1, next("position 1"), "the partition is pinned now")
	served := make(chan error, 1) // on the partition's fetching goroutine
	late.arm(func(cons natsjs.Consumer) {
		served <- func() error {
			if _, err := js.PublishMsg(ctx, topo.NewMsg("k", []byte("x"))); err != nil {
				return err
			}
			batch, err := cons.Fetch(1, natsjs.FetchMaxWait(5*time.Second), natsjs.FetchPriorityGroup(pinGroup))
			if err != nil {
				return err
			}
			n := 0
			for range batch.Messages() { // received by nobody: the pull was given up
				n++
			}
			if n != 1 {
				return fmt.Errorf("the pull given up got %d messages, want position 2 (%v)", n, batch.Error())
			}
			return batch.Error()
		}()
	})
	require.NoError(t, <-served)
	require.EqualValues(t, 2, next("position 2, delivered to the pull given up"))
	require.EqualValues(t, 1, c.Stats().Resets, "one reset repaired it")
}
