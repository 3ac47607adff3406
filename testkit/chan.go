package testkit

// Closed reports whether ch is closed, without waiting. It is meant for the
// channels a test only watches for their close (Done channels and the
// like): on one that holds a sent value it takes that value and reports
// true. Safe for concurrent use; the answer may be stale once returned,
// except that a closed channel stays closed.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
