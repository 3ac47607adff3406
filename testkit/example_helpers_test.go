package testkit_test

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/aggflow/aggflow/component"
	"github.com/aggflow/aggflow/testkit"
)

// A LogCapture behind the logger under test keeps its records; Records
// filters them.
func ExampleLogCapture() {
	logs := &testkit.LogCapture{Level: slog.LevelWarn}
	log := slog.New(logs)
	log.Info("dropped: below the level")
	log.Warn("handler failed, retrying", "attempt", 1)
	log.Error("handler failed, settled", "attempt", 3)
	for _, r := range logs.Records(nil) {
		fmt.Println(r.Level, r.Message, r.Attrs["attempt"])
	}
	fmt.Println(len(logs.Records(func(r testkit.LogRecord) bool { return r.Level >= slog.LevelError })))
	// Output:
	// WARN handler failed, retrying 1
	// ERROR handler failed, settled 3
	// 1
}

// A LogGoexit ends the goroutine that logs its message: here one that
// component.Go guards, which reports the Goexit.
func ExampleLogGoexit() {
	logs := &testkit.LogGoexit{Message: "commit hook panicked"}
	log := slog.New(logs)
	ended := make(chan error, 1)
	component.Go(func() error {
		log.Info("committed")
		log.Error("commit hook panicked")
		fmt.Println("not reached")
		return nil
	}, func(err error) { ended <- err })
	err := <-ended
	fmt.Println(logs.Exited(), errors.Is(err, component.ErrGoexit))
	// Output:
	// true true
}

// A LogPanic panics on the records of its prefix: here under
// component.Call, which returns the panic as a *PanicError.
func ExampleLogPanic() {
	log := slog.New(&testkit.LogPanic{Prefix: "lease lapsed"})
	err := component.Call(func() error {
		log.Info("lease renewed")
		log.Warn("lease lapsed: the group may have fenced this member")
		return nil
	}, nil)
	var pe *component.PanicError
	fmt.Println(errors.As(err, &pe), pe.Value)
	// Output:
	// true log handler: lease lapsed: the group may have fenced this member
}

// Closed tells, without waiting, whether a Done channel is closed yet.
func ExampleClosed() {
	done := make(chan struct{})
	fmt.Println(testkit.Closed(done))
	close(done)
	fmt.Println(testkit.Closed(done))
	// Output:
	// false
	// true
}
