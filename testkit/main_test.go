package testkit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests start goroutines of their own: none may outlive them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
