package dispatch_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// minRapidChecks is the number of cases each property test runs unless
// -rapid.checks or RAPID_CHECKS asks for another number.
const minRapidChecks = "200"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if !explicit && flag.Lookup("rapid.checks") != nil {
		if err := flag.Set("rapid.checks", minRapidChecks); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
