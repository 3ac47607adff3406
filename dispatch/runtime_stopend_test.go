package dispatch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/dispatch"
)

// errRefused is a handler's failure that, under StopOnError, becomes its
// dispatcher's Err, so that the Runtime's graceful stop ends with a failure
// (as a broker binding's refused final commit does).
var errRefused = errors.New("deposit refused")

// A Runtime's StopGracefully returns in StateStopped, and once Done closed
// Err holds the failure it returned, or nil with nil (docs/lifecycle.md: the
// Runtime's stop returns when its sequence ended; Done and Err follow). The
// stop's result and the physical end race, so each case is repeated; one
// miss fails.
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
					dispatch.WithErrorPolicy(dispatch.StopOnError), quietOf[deposit]())
				if err != nil {
					t.Fatal(err)
				}
				rt, err := component.NewRuntime("bank", []component.Component{d})
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
				state := rt.State()
				<-rt.Done()
				if fail != errors.Is(stopErr, errRefused) {
					t.Fatalf("run %d: StopGracefully returned %v", i, stopErr)
				}
				if state != component.StateStopped || (rt.Err() == nil) != (stopErr == nil) ||
					(stopErr != nil && !errors.Is(rt.Err(), errRefused)) {
					t.Fatalf("run %d: StopGracefully returned %v, but then State was %v and, once done, Err %v",
						i, stopErr, state, rt.Err())
				}
			}
		})
	}
}
