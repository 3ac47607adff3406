package main

import (
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestHold: the hold lasts its duration, ends early on a signal (which it
// returns), and is no wait at all when not positive.
func TestHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		interrupt := make(chan os.Signal, 1)
		start := time.Now()
		assert.Nil(t, hold(time.Minute, interrupt))
		assert.Equal(t, time.Minute, time.Since(start))

		start = time.Now()
		go func() {
			time.Sleep(10 * time.Second)
			interrupt <- syscall.SIGTERM
		}()
		assert.Equal(t, syscall.SIGTERM, hold(time.Hour, interrupt))
		assert.Equal(t, 10*time.Second, time.Since(start))

		start = time.Now()
		interrupt <- os.Interrupt
		assert.Nil(t, hold(0, interrupt))
		assert.Equal(t, os.Interrupt, <-interrupt, "a signal a zero hold left unread")
		assert.Zero(t, time.Since(start))
	})
}
