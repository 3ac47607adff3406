package dispatch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aggflow/aggflow/dispatch"
)

// errRefused is a handler's failure that, under StopOnError, becomes its
// dispatcher's Err, so that the Runtime's graceful stop ends with a failure
// (as a broker binding's refused final commit does).
var errRefused = errors.New("deposit refused")

// A Runtime's StopGracefully that returned has reached the end
// docs/lifecycle.md promises for every handle ("it waits ... until the handle
// is stopped ... and every goroutine it owns has exited (Done closes). It
// returns nil, or Err()"): State is StateStopped, Done is closed, and Err is
// what it returned. The stop's result and the physical end race, so each case
// is repeated; one miss fails.
func TestRuntimeStopGracefullyReturnsAtTheEnd(t *testing.T) {
	const runs = 300
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "stopped", true: "failed"}[fail], func(t *testing.T) {
			for i := range runs {
				handler := func(context.Context, deposit) error { return nil }
				if fail {
					handler = func(context.Context, deposit) error { return errRefused }
				}
				d, err := dispatch.New[deposit]("deposits", accounts, nil, handler,
					dispatch.WithErrorPolicy[deposit](dispatch.StopOnError), quietOf[deposit]())
				if err != nil {
					t.Fatal(err)
				}
				rt, err := dispatch.NewRuntime("bank", []dispatch.Component{d})
				if err != nil {
					t.Fatal(err)
				}
				if err := rt.Prepare(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := rt.Start(); err != nil {
					t.Fatal(err)
				}
				if fail {
					if err := d.Emit(context.Background(), deposits()[0]); err != nil {
						t.Fatal(err)
					}
					<-d.Done() // the failure stopped the dispatcher: the Runtime's stop fails
				}
				stopErr := rt.StopGracefully(context.Background())
				state, done, rtErr := rt.State(), isClosed(rt.Done()), rt.Err()
				<-rt.Done()
				if fail != errors.Is(stopErr, errRefused) {
					t.Fatalf("run %d: StopGracefully returned %v", i, stopErr)
				}
				if state != dispatch.StateStopped || !done || (rtErr == nil) != (stopErr == nil) ||
					(stopErr != nil && !errors.Is(rtErr, errRefused)) {
					t.Fatalf("run %d: StopGracefully returned %v, but then State was %v, Done closed %v, Err %v",
						i, stopErr, state, done, rtErr)
				}
			}
		})
	}
}
