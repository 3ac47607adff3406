package main

import (
	"os"
	"syscall"
)

// Exit statuses of a run stopped by a signal: 128 + the signal's number, as
// shells report a process the signal killed.
const (
	exitInterrupted = 130 // SIGINT
	exitTerminated  = 143 // SIGTERM
)

// signalStatus is the exit status of a run that sig stopped.
func signalStatus(sig os.Signal) int {
	if sig == syscall.SIGTERM {
		return exitTerminated
	}
	return exitInterrupted
}

// signalName names sig as kill(1) does.
func signalName(sig os.Signal) string {
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

func (s *signalled) Error() string { return "flights: interrupted by " + signalName(s.sig) }
