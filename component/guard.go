package component

import (
	"runtime/debug"
	"sync"
)

// Call runs f, user code, on the calling goroutine and returns f's error, or
// f's panic recovered as a *PanicError (with the panicking stack). A
// runtime.Goexit in f cannot be stopped: exited, if not nil, is called with
// a *PanicError whose Value is ErrGoexit, before the goroutine goes on
// unwinding (the caller's deferred calls run; Call does not return). It is
// the one guard of the module, written once: a panic is told from a Goexit
// by two deferred calls, as singleflight does. Cost: two deferred calls and
// f's closure.
func Call(f func() error, exited func(*PanicError)) (err error) {
	normal := false // f returned, or its panic was recovered
	defer func() {
		if !normal && exited != nil {
			exited(&PanicError{Value: ErrGoexit, Stack: debug.Stack()})
		}
	}()
	func() {
		returned := false
		defer func() {
			if !returned {
				if v := recover(); v != nil {
					err = NewPanicError(v)
				} // else runtime.Goexit: this frame unwinds on
			}
		}()
		err = f()
		returned = true
	}()
	normal = true
	return err
}

// Aside calls f on a goroutine of its own and waits for it to end. It
// returns f's panic, or exited true when f called runtime.Goexit, which,
// run inline, would end the caller's goroutine with it. Costs a goroutine
// per call: for calls off the per-item path (discards, commits).
func Aside(f func()) (p *PanicError, exited bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := Call(func() error { f(); return nil }, func(*PanicError) { exited = true })
		p, _ = err.(*PanicError)
	}()
	<-done
	return p, exited
}

// Catch, deferred directly (`defer component.Catch(&err)`), turns a panic
// of the calling function into a *PanicError in *err; a runtime.Goexit goes
// on. It is Call's form for the per-item path: the deferred call is
// open-coded, with no closure to allocate.
func Catch(err *error) {
	if v := recover(); v != nil {
		*err = NewPanicError(v)
	}
}

// Go starts f on a goroutine of its own, under Call's guard, and calls end
// there with how f ended: f's error, its panic as a *PanicError, or, after
// a runtime.Goexit, a *PanicError of ErrGoexit (the goroutine then ends).
// end is called once, on every path; a panic of end goes on up. It is
// Lifecycle.Go for goroutines no Lifecycle owns (a flux subscription's):
// the caller joins them itself, in end. Cost: one goroutine.
func Go(f func() error, end func(error)) {
	go func() {
		err := Call(f, func(p *PanicError) { end(p) })
		end(err)
	}()
}

// GoEach runs f(0) ... f(n-1), each on a goroutine of its own under Call's
// guard, and returns once all have ended: errs[i] is how f(i) ended (its
// error, its panic as a *PanicError, or a runtime.Goexit's *PanicError of
// ErrGoexit). It is sync.WaitGroup.Go's fan-out with the guard, for the
// stops that release many parts at once. Cost: n goroutines and a slice.
func GoEach(n int, f func(i int) error) (errs []error) {
	errs = make([]error, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		Go(func() error { return f(i) }, func(err error) {
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	return errs
}

// RecoverAt, deferred directly (`defer component.RecoverAt(&stage, at,
// &p)`), recovers a panic into *p while *stage is at (the user code of a
// path of stages runs) and lets a panic at any other stage, or a
// runtime.Goexit, go on: Catch for a hot path that guards one stage only,
// its deferred call open-coded. A deferred call before it tells the ends
// apart: *p set, a panic at; *stage not yet at its end and *p nil, a
// Goexit (or a panic elsewhere, going on).
func RecoverAt[S comparable](stage *S, at S, p **PanicError) {
	if *stage != at {
		return
	}
	if v := recover(); v != nil {
		*p = NewPanicError(v)
	}
}
