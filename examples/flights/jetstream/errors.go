package main

import "errors"

var (
	// errFlightEncoding: a message of the stream is not an encoded flight.
	errFlightEncoding = errors.New("flights: not an encoded flight")
	// errStalled: under -assign dynamic, the members' leases did not reach
	// what the run waits for, or the acknowledgements stopped moving, within
	// the conductor's bounds.
	errStalled = errors.New("flights: the dynamic assignment stalled")
)
