package schedulers

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDefaultPoolSize(t *testing.T) {
	assert.Equal(t, envPositive("AGGFLOW_POOL_SIZE", runtime.GOMAXPROCS(0)), DefaultPoolSize)
	assert.Equal(t, envPositive("AGGFLOW_BOUNDED_ELASTIC_SIZE", 10*runtime.GOMAXPROCS(0)), DefaultBoundedElasticSize)
}

func TestEnvPositive(t *testing.T) {
	for value, want := range map[string]int{"7": 7, "1": 1, "0": 5, "-2": 5, "many": 5, "": 5, " 3": 5} {
		t.Setenv("AGGFLOW_TEST_POOL", value)
		assert.Equal(t, want, envPositive("AGGFLOW_TEST_POOL", 5), "value %q", value)
	}
}
