package component_test

import (
	"strings"
	"testing"

	"github.com/aggflow/aggflow/testkit"
)

// allowed are the places that may start a goroutine or recover: this
// package (the guard), internal/ (its wrappers for the other modules), and
// the scheduler's runner, whose per-task deferred call is open-coded.
var allowed = []string{"component/", "internal/", "schedulers/parallel.go"}

// TestNoBareGoOrRecover parses every non-test Go file of the root module
// and fails on a go statement or a call of the builtin recover outside the
// allow-list, naming file:line: user code runs under component.Call, and
// goroutines start with Lifecycle.Go, held, guarded and recorded.
func TestNoBareGoOrRecover(t *testing.T) {
	sites, err := testkit.BareGoSites("..", allowed...)
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) > 0 {
		t.Errorf("%d sites start a goroutine or recover outside the guard; use component.Call, Catch or Lifecycle.Go:\n\t%s",
			len(sites), strings.Join(sites, "\n\t"))
	}
}
