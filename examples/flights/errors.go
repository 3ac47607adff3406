package main

import "errors"

var (
	// errUsage reports a command line that cannot run; flag has already
	// printed the details.
	errUsage = errors.New("flights: usage")
	// errDisagree: the outcomes read back through rxgo are not those the
	// dispatcher's Stats count.
	errDisagree = errors.New("flights: the outcomes read back disagree with the dispatcher's Stats")
	// errFlightEncoding: a message of the -source jetstream stream is not
	// an encoded flight.
	errFlightEncoding = errors.New("flights: not an encoded flight")
	// errStalled: under -assign dynamic, the members' leases did not reach
	// what the run waits for, or the acknowledgements stopped moving, within
	// the conductor's bounds.
	errStalled = errors.New("flights: the dynamic assignment stalled")
)
