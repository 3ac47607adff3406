package job

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Exit statuses of a run stopped by a signal: 128 + the signal's number, as
// shells report a process the signal killed.
const (
	ExitInterrupted = 130 // SIGINT
	ExitTerminated  = 143 // SIGTERM
)

// RepeatWithin is how soon after the first a signal of the same kind is
// taken for the same stop delivered twice, not a request to force:
// timeout(1), for one, signals the process and then its process group.
// A person pressing Ctrl-C again is slower.
const RepeatWithin = 100 * time.Millisecond

// SignalStatus is the exit status of a run that sig stopped.
func SignalStatus(sig os.Signal) int {
	if sig == syscall.SIGTERM {
		return ExitTerminated
	}
	return ExitInterrupted
}

// SignalName names sig as kill(1) does.
func SignalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// signalled is the cause of a decoding cut short by a signal.
type signalled struct{ sig os.Signal }

func (s *signalled) Error() string { return "flights: interrupted by " + SignalName(s.sig) }

// ProcessEnv is the process's Env: its standard streams, and its SIGINT
// and SIGTERM on Interrupt until stop is called.
func ProcessEnv() (e Env, stop func()) {
	interrupt := make(chan os.Signal, 2)
	signal.Notify(interrupt, os.Interrupt, syscall.SIGTERM)
	return Env{Stdout: os.Stdout, Stderr: os.Stderr, Interrupt: interrupt}, func() { signal.Stop(interrupt) }
}
