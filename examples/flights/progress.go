package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressMode is the -progress flag: when progress bars are drawn.
type progressMode int

const (
	progressAuto   progressMode = iota // when stderr is a terminal and the work is large
	progressAlways                     // on stderr whatever it is
	progressNever
)

var progressModes = [...]string{progressAuto: "auto", progressAlways: "always", progressNever: "never"}

func (m *progressMode) String() string { return progressModes[*m] }

func (m *progressMode) Set(s string) error {
	for i, name := range progressModes {
		if s == name {
			*m = progressMode(i)
			return nil
		}
	}
	return fmt.Errorf("want auto, always or never, not %q", s)
}

// progressEvery is how often a bar is redrawn.
const progressEvery = 100 * time.Millisecond

// bar is what a progress bar shows: done() out of total, polled every
// progressEvery.
type bar struct {
	description string
	total       int64
	// worth is the smallest total for which progressAuto draws the bar:
	// smaller work ends before the bar would show anything.
	worth int64
	// unit is what is counted; "bytes" shows sizes (kB, MB) instead.
	unit string
}

// startProgress draws b on w as mode says: always, never, or (auto) when w
// is a terminal and b.total is at least b.worth. The returned stop ends the
// drawing goroutine and waits for it; complete tells whether to fill the bar
// or leave it where it stopped.
func startProgress(w io.Writer, mode progressMode, b bar, done func() int64) (stop func(complete bool)) {
	if mode == progressNever || mode == progressAuto && (b.total < b.worth || !isTerminal(w)) {
		return func(bool) {}
	}
	return drawProgress(w, b, done)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// drawProgress draws the bar on w whatever w is.
func drawProgress(w io.Writer, b bar, done func() int64) (stop func(complete bool)) {
	options := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(b.description),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(progressEvery),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true), // starts the rate clock now
	}
	if b.unit == "bytes" {
		options = append(options, progressbar.OptionShowBytes(true)) // with a rate in B/s
	} else {
		options = append(options, progressbar.OptionShowIts(), progressbar.OptionSetItsString(b.unit))
	}
	pb := progressbar.NewOptions64(b.total, options...)
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				_ = pb.Set64(done())
			}
		}
	}()
	return func(complete bool) {
		close(quit)
		<-exited
		if complete {
			_ = pb.Finish()
		} else {
			_ = pb.Exit()
			fmt.Fprintln(w)
		}
	}
}
