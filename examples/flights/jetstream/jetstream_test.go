package main

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
	"github.com/aggflow/aggflow/partition"
)

// A flight survives its encoding for the stream, but for its origin, which
// travels as the key; anything but an encoding's length is refused.
func FuzzFlightEncoding(f *testing.F) {
	f.Add(int64(986_000_000_000_000), int32(-5), int32(1200), uint16(3), []byte("short"))
	f.Fuzz(func(t *testing.T, departure int64, delay, distance int32, destination uint16, junk []byte) {
		in := flightdata.Flight{Departure: departure, Delay: delay, Distance: distance, Destination: flightdata.Airport(destination), Origin: 7}
		d, err := decodeDeparture("ORD", encodeFlight(in))
		if err != nil {
			t.Fatal(err)
		}
		in.Origin = 0
		if d.Flight != in || d.OriginCode != "ORD" {
			t.Fatalf("decoded %+v from %+v", d, in)
		}
		if _, err := decodeDeparture("ORD", junk); len(junk) != flightSize && !errors.Is(err, errFlightEncoding) {
			t.Fatalf("%d bytes decoded: %v", len(junk), err)
		}
	})
}

// testLeaseTTL is the leases' TTL of the dynamic runs under test: longer
// than the demo's, so that a loaded machine (the race detector, other
// tests) renews them in time. With 2 s leases, renewals that missed their
// deadline under a load average of 20 lost partitions mid-run, and the run
// counted 9 to 23 claims of a and replays.
const testLeaseTTL = 10 * time.Second

// TestJetStreamDynamic: under -assign dynamic the embedded sample is
// consumed by members a and b; b starts once a holds every partition and
// takes its half by a graceful handoff, with the states of their airports,
// and the merged states are those of the sequential fold, with no flight
// lost, replayed or dropped as a duplicate.
func TestJetStreamDynamic(t *testing.T) {
	code, stdout, stderr := runWith(t, []string{"-json", "-assign", "dynamic", "-lease-ttl", testLeaseTTL.String()})
	require.Equal(t, job.ExitOK, code, "stdout: %s\nstderr: %s", stdout, stderr)
	var s summary
	require.NoError(t, json.Unmarshal([]byte(stdout), &s), stdout)
	assert.Equal(t, job.Verified, s.Verification, s.Difference)
	assert.Empty(t, s.Error)
	assert.False(t, s.Partial)
	assert.Equal(t, job.Counts{Received: 20_000, Succeeded: 20_000}, s.Exchanges)
	assert.Zero(t, s.Lost)
	assert.Zero(t, s.Violations)
	assert.Equal(t, 220, s.Aggregates)

	b := s.Broker
	require.NotNil(t, b)
	assert.Equal(t, "dynamic", b.Assignment)
	assert.Equal(t, testLeaseTTL, b.LeaseTTL)
	assert.Positive(t, b.Handoff)
	assert.Zero(t, b.Replayed, "a graceful handoff replays nothing")
	assert.Zero(t, b.Duplicates)
	require.Len(t, b.Members, 2)
	ma, mb := b.Members[0], b.Members[1]
	assert.Equal(t, "a", ma.Name)
	assert.Equal(t, "b", mb.Name)
	assert.Equal(t, []int32{0, 1, 2, 3}, ma.Partitions, "a hands off its highest")
	assert.Equal(t, []int32{4, 5, 6, 7}, mb.Partitions)
	assert.Equal(t, 8, ma.Claims, "a claimed every partition alone")
	assert.Equal(t, 4, ma.Releases, "then handed 4 off")
	assert.Equal(t, 4, mb.Claims)
	assert.Zero(t, mb.Releases)
	assert.Equal(t, int64(20_000), ma.Applied+mb.Applied)
	assert.Positive(t, mb.Applied, "b folded flights after the handoff")
	assert.Positive(t, mb.Adopted, "of airports whose first flights a folded")
	assert.Zero(t, ma.Adopted, "nobody held a state before a")
	for _, m := range b.Members {
		// Redelivered may not be 0: a position the server first sent to a
		// pull request the old owner had given up comes again with
		// Attempt 2, though no handler had it (counted, never applied
		// twice: Replayed is 0).
		assert.Zero(t, m.Replayed+m.Duplicates, "%s applied nothing twice", m.Name)
		assert.LessOrEqual(t, m.Redelivered, m.Applied)
	}
}

// TestJetStreamStatic: the default assignment is static, 4 partitions told
// to each process, and says so.
func TestJetStreamStatic(t *testing.T) {
	code, stdout, stderr := runWith(t, []string{"-assign", "static"})
	require.Equal(t, job.ExitOK, code, "stdout: %s\nstderr: %s", stdout, stderr)
	containsAll(t, stdout, "assignment  static: each process told its partitions (0,1,2,3 and 4,5,6,7); 0 replays skipped, 0 duplicates dropped",
		"lost        0", "\nverified\n")
	assert.NotContains(t, stdout, "member ")
}

// TestAssignUsage: -assign takes static or dynamic, -lease-ttl a TTL the
// binding accepts, with -assign dynamic; -source and -metrics are the
// in-process job's.
func TestAssignUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-assign", "sometimes"}, `invalid value "sometimes" for flag -assign: want static or dynamic, not "sometimes"`},
		{[]string{"-source", "jetstream"}, "flag provided but not defined: -source"},
		{[]string{"-metrics", "127.0.0.1:0"}, "flag provided but not defined: -metrics"},
		{[]string{"-parallelism", "0"}, "flights-jetstream: -parallelism must be at least 1"},
		{[]string{"-assign", "dynamic", "-lease-ttl", "10ms"}, "flights-jetstream: -lease-ttl must be at least 1s (jetstream.MinLeaseTTL)"},
		{[]string{"-lease-ttl", "5s"}, "flights-jetstream: -lease-ttl is -assign dynamic's: not with -assign static"},
	} {
		code, stdout, stderr := runWith(t, tc.args)
		assert.Equal(t, job.ExitUsage, code, "%v", tc.args)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
		assert.Contains(t, stderr, "usage: flights-jetstream", "%v", tc.args)
	}
}

// TestMemberLine: the summary's lines of a dynamic assignment.
func TestMemberLine(t *testing.T) {
	m := memberSummary{Name: "b", Partitions: []int32{4, 5}, Claims: 2, Releases: 1, Applied: 1_234, Adopted: 1, Replayed: 2, Redelivered: 3}
	assert.Equal(t, "partitions 4,5 at the end; 2 claims, 1 release (lease bucket); 1,234 flights applied, 1 airport state taken over; "+
		"2 replays skipped, 3 redelivered, 0 duplicates dropped", m.line())
	assert.Equal(t, "no partition at the end; 0 claims, 0 releases (lease bucket); 0 flights applied, 0 airport states taken over; "+
		"0 replays skipped, 0 redelivered, 0 duplicates dropped", memberSummary{}.line())
	b := brokerSummary{Partitions: 8, Assignment: "dynamic", LeaseTTL: leaseTTL, Handoff: 510 * time.Millisecond, Replayed: 2,
		Members: []memberSummary{{Name: "a"}, m}}
	assert.Equal(t, "dynamic: members a and b, leases of 2s; the second started once the first held all 8 partitions, and held its share 0.510 s later; "+
		"half the flights published before, half after; 2 replays skipped, 0 duplicates dropped", b.assignmentLine())
}

// TestAirportsPositions: a state is applied past its last position only,
// adopted only from further on, and snapshot copies those with a flight.
func TestAirportsPositions(t *testing.T) {
	held := &airports{states: map[string]*heldAirport{}}
	f := flightdata.Flight{Departure: 1, Delay: 5}
	d := func(pos int64) partition.Delivery[job.Departure] {
		return partition.Delivery[job.Departure]{Exchange: job.Departure{Flight: f, OriginCode: "ORD"}, Position: pos}
	}
	assert.True(t, held.apply(d(3)))
	assert.False(t, held.apply(d(3)), "a replay")
	assert.False(t, held.apply(d(2)))
	assert.True(t, held.apply(d(7)))
	got := held.snapshot(nil)
	require.Contains(t, got, "ORD")
	assert.Equal(t, int64(2), got["ORD"].State.Departures)
	assert.Equal(t, int64(7), got["ORD"].Position)

	assert.False(t, held.adopt("ORD", airportState{Position: 7}), "not further on")
	var ahead airport.State
	ahead.Apply(f)
	assert.True(t, held.adopt("ORD", airportState{State: ahead, Position: 9}))
	assert.Equal(t, airportState{State: ahead, Position: 9}, held.snapshot(nil)["ORD"])
	held.of("LAX") // no flight: not in a snapshot
	assert.Len(t, held.snapshot(nil), 1)
	assert.Empty(t, held.snapshot(func(string) bool { return false }))
}
