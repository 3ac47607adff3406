package flightdata_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

func ExampleDecodeJSON() {
	const records = `[
	{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"},
	{"date":"2001/01/01 01:24","delay":-5,"distance":407,"origin":"LAS","destination":"OAK"}]`
	d, err := flightdata.DecodeJSON(context.Background(), strings.NewReader(records), "two.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range d.Flights {
		fmt.Println(flightdata.FormatDate(f.Departure), d.Code(f.Origin), "->", d.Code(f.Destination), f.Delay, f.Distance)
	}
	fmt.Println(d.Airports)

	_, err = flightdata.DecodeJSON(context.Background(), strings.NewReader(`[{"date":"2001/02/30 00:00"}]`), "bad.json")
	fmt.Println(err)
	// Output:
	// 2001/01/01 00:47 DTW -> LAS 66 1750
	// 2001/01/01 01:24 LAS -> OAK -5 407
	// [DTW LAS OAK]
	// flightdata: bad.json: row 1: missing or null field "delay"
}
