package jetstream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/source/jetstream"
)

// Every refusal of NewConsumer reads as the package's errors do, from the
// package's name on ("jetstream: invalid argument: consumer ..."), as those
// of the Subscription's and the Codec's fields do; the refusals of an option
// and of the Topology begin with `consumer "c": ` instead, the sentinel
// in the middle.
func TestNewConsumerRefusalsBeginWithThePackage(t *testing.T) {
	e := newEnv(t, 2)
	for name, c := range map[string]struct {
		owned []int32
		topo  func(*jetstream.Topology)
		opts  []jetstream.Option
	}{
		"owned out of range": {owned: []int32{2}},
		"short ttl":          {opts: []jetstream.Option{jetstream.WithDynamicAssignment("a", time.Millisecond)}},
		"no budget":          {owned: []int32{0}, opts: []jetstream.Option{jetstream.WithMaxPending(0)}},
		"bad stream name":    {owned: []int32{0}, topo: func(tp *jetstream.Topology) { tp.Stream = "a.b" }},
	} {
		sub := e.sub(c.owned)
		if c.topo != nil {
			c.topo(&sub.Topology)
		}
		_, err := jetstream.NewConsumer("c", sub, named, newSched(t), keyedCodec, noop, c.opts...)
		require.ErrorIs(t, err, jetstream.ErrInvalidArgument, name)
		assert.True(t, strings.HasPrefix(err.Error(), "jetstream: "), "%s: %q", name, err)
	}
}
