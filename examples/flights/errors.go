package main

import "errors"

// errDisagree: the outcomes read back through rxgo are not those the
// dispatcher's Stats count.
var errDisagree = errors.New("flights: the outcomes read back disagree with the dispatcher's Stats")
