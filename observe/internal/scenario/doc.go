// Package scenario is what the adapters' tests share: a run of real
// dispatchers whose outcomes are known from the exchanges (handlers that
// succeed, fail, panic, block; an unknown aggregate; a forced stop), random
// sequences of Observer events, and the model both are checked against:
// counts, handling times and queue-wait counts per label set, and the
// gauges. The tests of each adapter collect their metrics into a Got and
// compare it with the model's Want.
package scenario
