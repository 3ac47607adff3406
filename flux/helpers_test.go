package flux_test

import (
	"runtime"
	"testing"
	"time"
)

// exitAt is a Map function that calls runtime.Goexit (t.FailNow in a
// handler under test) on the item at.
func exitAt(at int) func(int) int {
	return func(v int) int {
		if v == at {
			runtime.Goexit()
		}
		return v
	}
}

// ended runs fn on a goroutine of its own and returns its result, failing
// the test if fn has not returned within a generous bound: what is tested
// here is that it returns at all, instead of hanging.
func ended(t *testing.T, fn func() error) error {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- fn() }()
	select {
	case err := <-res:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription did not end")
		return nil
	}
}
