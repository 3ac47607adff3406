package jetstream_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild())
	}
	if os.Getenv(envServe) != "" {
		os.Exit(runServer())
	}
	goleak.VerifyTestMain(m)
}
