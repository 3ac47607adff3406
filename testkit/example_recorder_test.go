package testkit_test

import (
	"context"
	"fmt"

	"github.com/aggflow/aggflow/testkit"
)

// A Recorder wraps the handler under test; the checkers then read its calls.
func ExampleRecorder() {
	type order struct {
		id  string
		seq int
	}
	rec := testkit.NewRecorder(func(o order) testkit.Tag { return testkit.Tag{Key: o.id, Seq: o.seq} },
		func(context.Context, order) error { return nil })
	for _, o := range []order{{"a", 0}, {"b", 0}, {"a", 1}, {"a", 0}} {
		_ = rec.Handle(context.Background(), o)
	}
	fmt.Println(testkit.GroupSerial(rec.Calls()))
	fmt.Println(testkit.PerKeyFIFO(rec.Calls()))
	// Output:
	// <nil>
	// testkit: key "a": seq 0 started (tick 7) after seq 1 (tick 5)
}
