package main

import (
	"context"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// fakeDispatcher records the stops asked of it; it is done when finish is
// called or on a forced stop.
type fakeDispatcher struct {
	done         chan struct{}
	finish       func()
	mu           sync.Mutex
	graceful     int
	forced       int
	gracefulDone bool // StopGracefully returned
}

func newFakeDispatcher() *fakeDispatcher {
	f := &fakeDispatcher{done: make(chan struct{})}
	f.finish = sync.OnceFunc(func() { close(f.done) })
	return f
}

func (f *fakeDispatcher) Done() <-chan struct{} { return f.done }

func (f *fakeDispatcher) StopGracefully(ctx context.Context) error {
	f.mu.Lock()
	f.graceful++
	f.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
	}
	f.mu.Lock()
	f.gracefulDone = true
	f.mu.Unlock()
	return nil
}

func (f *fakeDispatcher) ForceStop() {
	f.mu.Lock()
	f.forced++
	f.mu.Unlock()
	f.finish()
}

// TestAwait: the first signal drains, another one forces, except the first
// one again within job.RepeatWithin; a third changes nothing; await returns
// only after the graceful stop's goroutine did.
func TestAwait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		signals []os.Signal
		gaps    []time.Duration // before each signal but the first
		forced  bool
	}{
		{"none", nil, nil, false},
		{"one", []os.Signal{syscall.SIGTERM}, nil, false},
		{"repeated at once", []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, []time.Duration{0}, false},
		{"repeated later", []os.Signal{os.Interrupt, os.Interrupt}, []time.Duration{job.RepeatWithin}, true},
		{"another kind at once", []os.Signal{syscall.SIGTERM, os.Interrupt}, []time.Duration{0}, true},
		{"three", []os.Signal{os.Interrupt, syscall.SIGTERM, os.Interrupt}, []time.Duration{0, time.Second}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeDispatcher()
				interrupt := make(chan os.Signal, 1)
				type result struct {
					first  os.Signal
					forced bool
				}
				returned := make(chan result, 1)
				go func() {
					first, forced := await(f, interrupt, job.RepeatWithin)
					returned <- result{first, forced}
				}()
				for i, sig := range tc.signals {
					if i > 0 {
						time.Sleep(tc.gaps[i-1])
					}
					interrupt <- sig
					synctest.Wait()
				}
				f.finish() // a graceful drain, if one runs, ends now
				got := <-returned

				var first os.Signal
				if len(tc.signals) > 0 {
					first = tc.signals[0]
				}
				assert.Equal(t, result{first, tc.forced}, got)
				f.mu.Lock()
				defer f.mu.Unlock()
				assert.Equal(t, min(len(tc.signals), 1), f.graceful, "one graceful stop per run at most")
				assert.Equal(t, tc.forced, f.forced == 1)
				assert.LessOrEqual(t, f.forced, 1, "one force at most")
				assert.Equal(t, f.graceful == 1, f.gracefulDone, "the graceful stop returned before await")
			})
		})
	}
}
