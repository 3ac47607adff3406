package airport_test

import (
	"fmt"

	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

func ExampleFold() {
	d := &flightdata.Dataset{
		Airports: []string{"ATL", "BOS"},
		Flights: []flightdata.Flight{
			{Departure: 1, Delay: 12, Origin: 0},
			{Departure: 2, Delay: -3, Origin: 1},
			{Departure: 3, Delay: 0, Origin: 0},
			{Departure: 4, Delay: -1, Origin: 0},
		},
	}
	states := airport.Fold(d)
	for i, s := range states {
		fmt.Printf("%s: departures %d, mean delay %.2f, max %d, longest on-time run %d\n",
			d.Airports[i], s.Departures, s.MeanDelay, s.MaxDelay, s.LongestOnTimeRun)
	}

	dispatched := []airport.State{states[0], {}}
	fmt.Println(airport.Diff(d.Airports, states, func(i int) airport.State { return dispatched[i] }))
	// Output:
	// ATL: departures 3, mean delay 3.67, max 12, longest on-time run 2
	// BOS: departures 1, mean delay -3.00, max -3, longest on-time run 1
	// airport BOS: Departures is 0, the sequential fold gives 1
}
