package job

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// ProgressMode is the -progress flag: when progress bars are drawn.
type ProgressMode int

const (
	ProgressAuto   ProgressMode = iota // when stderr is a terminal and the work is large
	ProgressAlways                     // on stderr whatever it is
	ProgressNever
)

var progressModes = []string{ProgressAuto: "auto", ProgressAlways: "always", ProgressNever: "never"}

// progressEvery is how often a bar is redrawn.
const progressEvery = 100 * time.Millisecond

// Bar is what a progress bar shows: done() out of Total, polled every
// progressEvery.
type Bar struct {
	Description string
	Total       int64
	// Worth is the smallest total for which ProgressAuto draws the bar:
	// smaller work ends before the bar would show anything.
	Worth int64
	// Unit is what is counted; "bytes" shows sizes (kB, MB) instead.
	Unit string
}

// StartProgress draws b on w as mode says: always, never, or (auto) when w
// is a terminal and b.Total is at least b.Worth; under auto, work that
// large on a w that is not a terminal gets one line instead ("flights:
// decoding 13.5 MB"), so that seconds of it are not silent. The returned
// stop ends the drawing goroutine and waits for it; complete tells whether
// to fill the bar or leave it where it stopped.
func StartProgress(w io.Writer, mode ProgressMode, b Bar, done func() int64) (stop func(complete bool)) {
	switch {
	case mode == ProgressNever || mode == ProgressAuto && b.Total < b.Worth:
		return func(bool) {}
	case mode == ProgressAuto && !isTerminal(w):
		fmt.Fprintf(w, "flights: %s %s\n", b.Description, b.amount())
		return func(bool) {}
	}
	return drawProgress(w, b, done)
}

// amount says b.Total in b.Unit: "13.5 MB", "3,000,000 exchanges".
func (b Bar) amount() string {
	if b.Unit == "bytes" {
		return fmt.Sprintf("%.1f MB", float64(b.Total)/1e6)
	}
	return Thousands(b.Total) + " " + b.Unit
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// drawProgress draws the bar on w whatever w is.
func drawProgress(w io.Writer, b Bar, done func() int64) (stop func(complete bool)) {
	options := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(b.Description),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(progressEvery),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true), // starts the rate clock now
	}
	if b.Unit == "bytes" {
		options = append(options, progressbar.OptionShowBytes(true)) // with a rate in B/s
	} else {
		options = append(options, progressbar.OptionShowIts(), progressbar.OptionSetItsString(b.Unit))
	}
	pb := progressbar.NewOptions64(b.Total, options...)
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
