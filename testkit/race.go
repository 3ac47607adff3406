//go:build race

package testkit

// RaceEnabled reports whether the binary runs under the race detector, for
// a test of allocation counts to skip there: under it sync.Pool drops items
// at random and the detector allocates itself.
const RaceEnabled = true
