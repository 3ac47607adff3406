package jstest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/source/jetstream/jstest"
)

// An embedded server for a test or a demo: start, connect, shut down.
func ExampleStart() {
	s, err := jstest.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Shutdown()
	nc, err := nats.Connect(s.URL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(stream.CachedInfo().Config.Name)
	// Output:
	// ORDERS
}
