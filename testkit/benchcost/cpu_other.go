//go:build !unix

package benchcost

import "time"

// cpuTime is unknown here.
func cpuTime() time.Duration { return -1 }
