package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// -source rxgo: the embedded sample reaches the dispatcher through an rxgo
// Observable, and the outcomes counted in the summary are those read back
// through Results.Observable, which agree with the dispatcher's Stats.
func Example_sourceRxgo() {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-json", "-source", "rxgo"}, env{Env: job.Env{Stdout: &stdout, Stderr: &stderr, Interrupt: make(chan os.Signal)}})
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
