package aggregate_test

import (
	"sync"
	"testing"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/schedulers"
)

// The cached path of GetOrInitialize, next to the lookups it could have been
// built on: one lock per lookup as in Wow (mutex-map), a read lock
// (rwmutex-map) and sync.Map. Run with -cpu 1,2 to see contention.
func BenchmarkGetOrInitialize(b *testing.B) {
	s, err := aggregate.NewSchedulerSupplier("bench", aggregate.WithSchedulerFactory(fakes().factory))
	if err != nil {
		b.Fatal(err)
	}
	defer s.ForceStop()
	named := []aggregate.NamedAggregate{order, invoice, billingOrder}
	for _, n := range named {
		if _, err := s.GetOrInitialize(n); err != nil {
			b.Fatal(err)
		}
	}
	sch := newFake("bench-Order")
	var mu sync.Mutex
	var rw sync.RWMutex
	var sm sync.Map
	m := map[aggregate.MaterializedNamedAggregate]schedulers.Scheduler{}
	for _, n := range named {
		m[aggregate.Materialize(n)] = sch
		sm.Store(aggregate.Materialize(n), sch)
	}
	lookups := []struct {
		name string
		get  func(aggregate.NamedAggregate) schedulers.Scheduler
	}{
		{"aggflow", func(n aggregate.NamedAggregate) schedulers.Scheduler { sch, _ := s.GetOrInitialize(n); return sch }},
		{"mutex-map", func(n aggregate.NamedAggregate) schedulers.Scheduler {
			mu.Lock()
			defer mu.Unlock()
			return m[aggregate.Materialize(n)]
		}},
		{"rwmutex-map", func(n aggregate.NamedAggregate) schedulers.Scheduler {
			rw.RLock()
			defer rw.RUnlock()
			return m[aggregate.Materialize(n)]
		}},
		{"sync-map", func(n aggregate.NamedAggregate) schedulers.Scheduler {
			v, _ := sm.Load(aggregate.Materialize(n))
			return v.(schedulers.Scheduler)
		}},
	}
	inputs := []struct {
		name  string
		named aggregate.NamedAggregate
	}{{"materialized", order}, {"id", aggregate.NewID(order, "o-1")}}
	for _, in := range inputs {
		for _, l := range lookups {
			b.Run(in.name+"/"+l.name, func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if l.get(in.named) == nil {
							b.Error("no scheduler")
							return
						}
					}
				})
			})
		}
	}
}
