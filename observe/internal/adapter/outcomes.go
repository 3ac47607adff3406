package adapter

import "github.com/aggflow/aggflow/dispatch"

// Outcomes is the number of dispatch.Outcome values: an adapter keeps one
// precomputed label set per Labels and outcome, indexed by the outcome.
const Outcomes = int(dispatch.OutcomeDiscarded) + 1

// Known says whether o indexes a precomputed label set.
func Known(o dispatch.Outcome) bool { return o >= 0 && int(o) < Outcomes }
