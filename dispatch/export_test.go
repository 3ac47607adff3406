package dispatch

// SetTestHookIdle makes f run in a lane's leave between the lane going idle
// and the look-again, and returns the restore. Set it before the dispatcher
// starts and restore it once Done is closed.
func SetTestHookIdle(f func()) (restore func()) {
	testHookIdle = f
	return func() { testHookIdle = nil }
}

// SetTestHookMark makes f run in a lane's leave between its mark and going
// idle, and returns the restore; as SetTestHookIdle.
func SetTestHookMark(f func()) (restore func()) {
	testHookMark = f
	return func() { testHookMark = nil }
}

// SetTestHookSchedulerEnded makes f run in an engine's reaction to its
// scheduler's end, once the handlers' context is done, and returns the
// restore; as SetTestHookIdle.
func SetTestHookSchedulerEnded(f func()) (restore func()) {
	testHookSchedulerEnded = f
	return func() { testHookSchedulerEnded = nil }
}

// KeyLanes returns the lanes a dispatcher built WithKeyOrdering keeps.
func KeyLanes[T any](d *Dispatcher[T]) int { return d.engines[0].keyLanes() }

// KeyTableHashesIDs reports whether a dispatcher built WithKeyOrdering
// indexes its lanes by the ids' bytes rather than their HashCodes.
func KeyTableHashesIDs[T any](d *Dispatcher[T]) bool {
	e := d.engines[0]
	e.keyMu.Lock()
	defer e.keyMu.Unlock()
	return e.keys.byID
}
