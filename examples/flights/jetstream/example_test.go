package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// The embedded sample is published to an embedded NATS JetStream server,
// keyed by origin airport on 8 partitions, and consumed by two consumer
// processes (this program re-executed); their airport states, merged, are
// those of the sequential fold.
func Example() {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-json"}, job.Env{Stdout: &stdout, Stderr: &stderr, Interrupt: make(chan os.Signal)})
	var s struct {
		job.Summary
		Broker brokerSummary `json:"broker"`
	}
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
