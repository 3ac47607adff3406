package kafka_test

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/aggflow/aggflow/testkit"
)

func TestMain(m *testing.M) {
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	goleak.VerifyTestMain(m)
}

// TestNoBareGoOrRecover fails on a go statement or a call of the builtin
// recover in the module's non-test files, naming file:line: user code (the
// codec, the hooks, the logger) runs under component.Call or Catch, and
// goroutines start with component.Go or the consumer's Lifecycle.Go, so that
// a panic or runtime.Goexit is caught and recorded.
func TestNoBareGoOrRecover(t *testing.T) {
	sites, err := testkit.BareGoSites(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) > 0 {
		t.Errorf("%d sites start a goroutine or recover outside the guard; use component.Call, Catch, Go or Lifecycle.Go:\n\t%s",
			len(sites), strings.Join(sites, "\n\t"))
	}
}
