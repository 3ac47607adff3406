package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressMinRows is the input size above which a progress bar is worth
// drawing; smaller inputs finish before it would show anything.
const progressMinRows = 100_000

// progressEvery is how often the bar is redrawn.
const progressEvery = 100 * time.Millisecond

// startProgress draws a bar of done() out of total on w, when w is a
// terminal and total exceeds progressMinRows; otherwise it does nothing. The
// returned stop ends the drawing goroutine and waits for it; complete tells
// whether to fill the bar or leave it where it stopped.
func startProgress(w io.Writer, total int64, done func() int64) (stop func(complete bool)) {
	f, ok := w.(*os.File)
	if !ok || total <= progressMinRows || !term.IsTerminal(int(f.Fd())) {
		return func(bool) {}
	}
	return drawProgress(w, total, done)
}

// drawProgress draws the bar on w whatever w is.
func drawProgress(w io.Writer, total int64, done func() int64) (stop func(complete bool)) {
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("dispatching"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("exchanges"),
		progressbar.OptionThrottle(progressEvery),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true), // starts the rate clock now
	)
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
				_ = bar.Set64(done())
			}
		}
	}()
	return func(complete bool) {
		close(quit)
		<-exited
		if complete {
			_ = bar.Finish()
		} else {
			_ = bar.Exit()
			fmt.Fprintln(w)
		}
	}
}
