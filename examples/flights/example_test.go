package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// -source rxgo: the embedded sample reaches the dispatcher through an rxgo
// Observable, and the outcomes counted in the summary are those read back
// through Results.Observable, which agree with the dispatcher's Stats.
func Example_sourceRxgo() {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-json", "-source", "rxgo"}, env{stdout: &stdout, stderr: &stderr, interrupt: make(chan os.Signal)})
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		panic(err)
	}
	fmt.Println("exit status", code, "source", s.Source)
	fmt.Printf("exchanges %+v\n", s.Exchanges)
	fmt.Printf("read back %+v\n", *s.ReadBack)
	fmt.Println(s.Verification)
	// Output:
	// exit status 0 source rxgo
	// exchanges {Received:20000 Succeeded:20000 Failed:0 Discarded:0 InFlight:0}
	// read back {Read:20000 Dropped:0 Agrees:true}
	// verified
}

// -source jetstream: the embedded sample is published to an embedded NATS
// JetStream server, keyed by origin airport on 8 partitions, and consumed
// by two consumer processes (this program re-executed); their airport
// states, merged, are those of the sequential fold.
func Example_sourceJetstream() {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-json", "-source", "jetstream"}, env{stdout: &stdout, stderr: &stderr, interrupt: make(chan os.Signal)})
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		panic(fmt.Sprint(err, stderr.String()))
	}
	fmt.Println("exit status", code, "source", s.Source, "partitions", s.Broker.Partitions, "consumer processes", s.Broker.Consumers)
	fmt.Printf("exchanges %+v\n", s.Exchanges)
	fmt.Println("lost", s.Lost, "violations", s.Violations, "airports", s.Aggregates)
	fmt.Println(s.Verification)
	// Output:
	// exit status 0 source jetstream partitions 8 consumer processes 2
	// exchanges {Received:20000 Succeeded:20000 Failed:0 Discarded:0 InFlight:0}
	// lost 0 violations 0 airports 220
	// verified
}
