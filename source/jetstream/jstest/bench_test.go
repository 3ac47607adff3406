package jstest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/source/jetstream/jstest"
)

// BenchmarkStartShutdown is the cost of an embedded server for one test:
// Start (until it accepts connections) and Shutdown (until its goroutines
// exited and the store is removed).
func BenchmarkStartShutdown(b *testing.B) {
	for b.Loop() {
		s, err := jstest.Start()
		require.NoError(b, err)
		s.Shutdown()
	}
}
