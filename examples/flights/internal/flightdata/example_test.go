package flightdata_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing/fstest"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

func ExampleDecodeJSON() {
	const records = `[
	{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"},
	{"date":"2001/01/01 01:24","delay":-5,"distance":407,"origin":"LAS","destination":"OAK"}]`
	d, err := flightdata.DecodeJSON(context.Background(), strings.NewReader(records), "two.json", flightdata.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range d.Flights {
		fmt.Println(flightdata.FormatDate(f.Departure), d.Code(f.Origin), "->", d.Code(f.Destination), f.Delay, f.Distance)
	}
	fmt.Println(d.Airports)

	_, err = flightdata.DecodeJSON(context.Background(), strings.NewReader(`[{"date":"2001/02/30 00:00"}]`), "bad.json", flightdata.Options{})
	fmt.Println(err)
	// Output:
	// 2001/01/01 00:47 DTW -> LAS 66 1750
	// 2001/01/01 01:24 LAS -> OAK -5 407
	// [DTW LAS OAK]
	// flightdata: bad.json: row 1: missing or null field "delay"
}

func ExampleOpenFS() {
	const records = `[{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS","carrier":"NW"}]`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(records))
	zw.Close()
	fsys := fstest.MapFS{"flights.json.gz": {Data: gz.Bytes()}}

	for _, strict := range []bool{false, true} {
		in, err := flightdata.OpenFS(fsys, "flights.json.gz")
		if err != nil {
			fmt.Println(err)
			return
		}
		var progress atomic.Int64
		d, err := in.Decode(context.Background(), flightdata.Options{Strict: strict, Progress: &progress})
		in.Close()
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(len(d.Flights), "flight, progress at the size:", progress.Load() == in.Size())
	}
	// Output:
	// 1 flight, progress at the size: true
	// flightdata: flights.json.gz: row 1: unknown field "carrier"
}

func ExampleOpen() {
	_, err := flightdata.Open(".")
	fmt.Println(err)
	_, err = flightdata.Open("doc.go")
	fmt.Println(err)
	_, err = flightdata.Open("absent.parquet")
	fmt.Println(err)
	// Output:
	// flightdata: .: is a directory (want a .json, .json.gz or .parquet file)
	// flightdata: doc.go: unknown input format (want .json, .json.gz or .parquet)
	// flightdata: absent.parquet: no such file or directory
}
