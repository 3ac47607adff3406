package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// The members are this test binary re-executed in member mode.
func TestMain(m *testing.M) {
	if spec := os.Getenv(memberEnv); spec != "" {
		os.Exit(runMember(spec, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// The sample through kfake and two member processes: the same verified
// summary as the in-process job.
func TestTheSampleIsVerifiedOnKafka(t *testing.T) {
	var out, errs bytes.Buffer
	code := run([]string{"-input", "../data/flights-20k.json.gz"}, &out, &errs)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errs.String())
	for _, line := range []string{"lost        0\n", "violations  0\n", "\nverified\n",
		"exchanges   produced 20000, handled 20000, failed 0, dropped 0"} {
		require.Contains(t, out.String(), line)
	}
	require.Equal(t, 2, strings.Count(out.String(), "member      member-"), "two members")
}

func TestABadCommandLineExits2(t *testing.T) {
	var out, errs bytes.Buffer
	require.Equal(t, exitUsage, run([]string{"-members", "0"}, &out, &errs))
	require.Contains(t, errs.String(), "must be positive")
	require.Equal(t, exitUsage, run([]string{"extra"}, &out, &errs))
	require.Equal(t, exitFailed, run([]string{"-input", "no-such-file.json"}, &out, &errs))
}

func TestMemberArgumentsRoundTrip(t *testing.T) {
	a := memberArgs{name: "member-1", brokers: []string{"127.0.0.1:1", "127.0.0.1:2"}, group: "g", topic: "t", airports: 224}
	got, err := parseMemberArgs(a.String())
	require.NoError(t, err)
	require.Equal(t, a, got)
	_, err = parseMemberArgs("a;b")
	require.Error(t, err)
}

// A flight survives the topic: decode(encode(f)) is f, and a value of
// another length is refused.
func FuzzFlightRecord(f *testing.F) {
	f.Add(int64(978307200000000), int32(-5), int32(1200), uint16(3), uint16(7), []byte("ORD"))
	f.Fuzz(func(t *testing.T, dep int64, delay, dist int32, origin, dest uint16, key []byte) {
		fl := flightdata.Flight{Departure: dep, Delay: delay, Distance: dist,
			Origin: flightdata.Airport(origin), Destination: flightdata.Airport(dest)}
		v := encode(fl)
		d, err := decode(key, v)
		require.NoError(t, err)
		require.Equal(t, fl, d.Flight)
		require.Equal(t, string(key), d.origin)
		_, err = decode(key, v[:len(v)-1])
		require.Error(t, err)
	})
}
