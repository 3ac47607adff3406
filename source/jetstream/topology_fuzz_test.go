package jetstream_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/aggflow/aggflow/source/jetstream"
)

// Any id goes to a partition in range, on that partition's subject, with
// the id in the key header.
func FuzzTopologyNewMsg(f *testing.F) {
	f.Add("order-42", 8)
	f.Add("", 1)
	f.Add("ÿ\x00é", 1000)
	f.Fuzz(func(t *testing.T, id string, n int) {
		if n < 1 || n > 1<<16 {
			return
		}
		topo := jetstream.Topology{Stream: "S", Prefix: "a.b", Partitions: n}
		p := topo.PartitionOf(id)
		if p < 0 || int(p) >= n {
			t.Fatalf("partition %d of %d", p, n)
		}
		m := topo.NewMsg(id, []byte("x"))
		if m.Subject != "a.b."+strconv.Itoa(int(p)) || !strings.HasPrefix(m.Subject, topo.Prefix+".") {
			t.Fatalf("subject %q for partition %d", m.Subject, p)
		}
		if got := m.Header.Get(jetstream.KeyHeader); got != id {
			t.Fatalf("key header %q, want %q", got, id)
		}
		if topo.PartitionOf(id) != p {
			t.Fatal("not deterministic")
		}
	})
}
