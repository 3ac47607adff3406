package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/examples/flights/data"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"

	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// scrapeWithin bounds the wait for the run's metrics: the embedded sample
// replays in well under a second, a minute covers a loaded machine under
// the race detector.
const scrapeWithin = time.Minute

// serving is a run of the program in the background with -metrics.
type serving struct {
	addr           string
	interrupt      chan os.Signal
	done           chan struct{}
	code           int
	stdout, stderr bytes.Buffer
}

// serve starts the program on args and returns once its metrics server
// listens. A cleanup ends the run (a signal ends a hold) and waits for it.
func serve(t *testing.T, args ...string) *serving {
	t.Helper()
	s := &serving{interrupt: make(chan os.Signal, 1), done: make(chan struct{})}
	listening := make(chan string, 1)
	e := env{Env: job.Env{Stdout: &s.stdout, Stderr: &s.stderr, Interrupt: s.interrupt}, serving: func(addr string) { listening <- addr }}
	go func() {
		defer close(s.done)
		s.code = run(args, e)
	}()
	t.Cleanup(func() {
		select {
		case s.interrupt <- os.Interrupt:
		default:
		}
		<-s.done
	})
	select {
	case s.addr = <-listening:
	case <-s.done:
		t.Fatalf("the run ended (%d) before serving: %s", s.code, s.stderr.String())
	}
	return s
}

// wait returns the exit status once the run ended.
func (s *serving) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(scrapeWithin):
		t.Fatal("the run did not end")
		return -1
	}
}

// noKeepAlive is a client that leaves no idle connection (nor its
// goroutines) behind.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// scrape GETs the exposition at addr and parses it.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := noKeepAlive.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}

// labels returns m's labels as a map.
func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, p := range m.GetLabel() {
		out[p.GetName()] = p.GetValue()
	}
	return out
}

// only returns the one metric of the family name, failing if there are
// more; nil when the family is absent.
func only(t *testing.T, families map[string]*dto.MetricFamily, name string) *dto.Metric {
	t.Helper()
	f, ok := families[name]
	if !ok {
		return nil
	}
	require.Len(t, f.GetMetric(), 1, "%s: one label set", name)
	return f.GetMetric()[0]
}

// settled says whether the scrape shows the whole embedded sample handled
// and nothing left in flight nor of the budget in use (the source's
// goroutine gives back what it took ahead when it ends, which may come
// after the last exchange ended).
func settled(t *testing.T, families map[string]*dto.MetricFamily) bool {
	t.Helper()
	success := only(t, families, "aggflow_exchanges_total")
	inFlight, pending := only(t, families, "aggflow_exchanges_in_flight"), only(t, families, "aggflow_budget_pending")
	return success != nil && success.GetCounter().GetValue() == 20_000 &&
		inFlight != nil && inFlight.GetGauge().GetValue() == 0 && pending != nil && pending.GetGauge().GetValue() == 0
}

// sampleAirports returns the codes of the embedded sample's airports.
func sampleAirports(t *testing.T) []string {
	t.Helper()
	in, err := data.OpenSample()
	require.NoError(t, err)
	defer in.Close()
	flights, err := in.Decode(context.Background(), flightdata.Options{})
	require.NoError(t, err)
	return flights.Airports
}

// TestMetricsScrape: -metrics serves the prommetrics Collector during the
// run and, with -metrics-hold, after it: a client scrapes it (polling a real
// server, which synctest cannot host) until the sample's 20,000 successes
// are counted, then finds the documented label sets, no airport code among
// the label values, histograms that count every exchange, and the gauges of
// the registered dispatcher. A signal ends the hold; the run's status and
// summary are those of a run without metrics, and the server is gone.
func TestMetricsScrape(t *testing.T) {
	s := serve(t, "-json", "-metrics", "127.0.0.1:0", "-metrics-hold", "1m")
	var families map[string]*dto.MetricFamily
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(scrapeWithin); ; <-tick.C {
		families = scrape(t, s.addr)
		if settled(t, families) {
			break
		}
		require.True(t, time.Now().Before(deadline), "no 20,000 successes within %v: %v", scrapeWithin, families)
	}

	var names []string
	for name := range families {
		names = append(names, name)
	}
	assert.ElementsMatch(t, []string{
		"aggflow_exchanges_total", "aggflow_exchange_queue_wait_seconds", "aggflow_exchange_handling_seconds",
		"aggflow_exchanges_in_flight", "aggflow_budget_pending", "aggflow_budget_limit",
	}, names)
	byOutcome := map[string]string{"dispatcher": "flights", "context": "flights", "aggregate": "Airport", "outcome": "success"}
	byAggregate := map[string]string{"dispatcher": "flights", "context": "flights", "aggregate": "Airport"}
	byDispatcher := map[string]string{"dispatcher": "flights"}
	for name, want := range map[string]map[string]string{
		"aggflow_exchanges_total":             byOutcome,
		"aggflow_exchange_handling_seconds":   byOutcome,
		"aggflow_exchange_queue_wait_seconds": byAggregate,
		"aggflow_exchanges_in_flight":         byDispatcher,
		"aggflow_budget_pending":              byDispatcher,
		"aggflow_budget_limit":                byDispatcher,
	} {
		assert.Equal(t, want, labels(only(t, families, name)), name)
	}
	airports := sampleAirports(t)
	require.Len(t, airports, 224)
	for name, f := range families {
		for _, m := range f.GetMetric() {
			for _, p := range m.GetLabel() {
				assert.NotContains(t, airports, p.GetValue(), "%s: an airport code as a label value", name)
			}
		}
	}

	for _, name := range []string{"aggflow_exchange_handling_seconds", "aggflow_exchange_queue_wait_seconds"} {
		h := only(t, families, name).GetHistogram()
		assert.Equal(t, uint64(20_000), h.GetSampleCount(), "%s: one value per exchange", name)
		assert.Positive(t, h.GetSampleSum(), name)
		cumulative := make([]uint64, 0, len(h.GetBucket()))
		for _, b := range h.GetBucket() {
			cumulative = append(cumulative, b.GetCumulativeCount())
		}
		require.NotEmpty(t, cumulative, name)
		assert.True(t, slices.IsSorted(cumulative), "%s: cumulative buckets %v", name, cumulative)
		assert.LessOrEqual(t, cumulative[len(cumulative)-1], h.GetSampleCount(), name)
	}
	assert.Equal(t, float64(dispatch.DefaultMaxPending), only(t, families, "aggflow_budget_limit").GetGauge().GetValue())

	s.interrupt <- os.Interrupt
	require.Equal(t, job.ExitOK, s.wait(t), s.stderr.String())
	sum := decodeSummary(t, outcome{code: s.code, stdout: s.stdout.String(), stderr: s.stderr.String()})
	assert.Equal(t, job.Verified, sum.Verification)
	assert.Equal(t, job.Counts{Received: 20_000, Succeeded: 20_000}, sum.Exchanges)
	containsAll(t, s.stderr.String(), "flights: serving metrics on http://"+s.addr+"/metrics\n",
		"flights: serving metrics for 1m0s more; SIGINT or SIGTERM ends the hold\n", "flights: SIGINT ended the hold\n")
	_, err := noKeepAlive.Get("http://" + s.addr + "/metrics")
	assert.Error(t, err, "the server is shut down")
}

// TestMetricsWithoutHold: without -metrics-hold the server closes with the
// run; with the rxgo source too.
func TestMetricsWithoutHold(t *testing.T) {
	s := serve(t, "-json", "-source", "rxgo", "-metrics", "127.0.0.1:0")
	require.Equal(t, job.ExitOK, s.wait(t), s.stderr.String())
	sum := decodeSummary(t, outcome{code: s.code, stdout: s.stdout.String(), stderr: s.stderr.String()})
	assert.Equal(t, job.Verified, sum.Verification)
	assert.Equal(t, &readBackSummary{Read: 20_000, Agrees: true}, sum.ReadBack)
	assert.NotContains(t, s.stderr.String(), "more; SIGINT")
	_, err := noKeepAlive.Get("http://" + s.addr + "/metrics")
	assert.Error(t, err, "the server is shut down")
}

// TestMetricsNoHoldAfterSignal: a run a signal stopped does not hold: it
// ends with the signal's status at once, the server shut down.
func TestMetricsNoHoldAfterSignal(t *testing.T) {
	args := append(slow(t), "-metrics", "127.0.0.1:0", "-metrics-hold", "1h")
	out := runWith(t, args, func(interrupt chan<- os.Signal) { interrupt <- os.Interrupt })
	s := decodeSummary(t, out)
	checkPartial(t, out.code, s, os.Interrupt, false)
	assert.Contains(t, out.stderr, "flights: serving metrics on http://127.0.0.1:")
	assert.NotContains(t, out.stderr, "more; SIGINT")
}

// TestMetricsBadAddress: an address that cannot be listened on fails the run
// before anything is decoded.
func TestMetricsBadAddress(t *testing.T) {
	out := runWith(t, []string{"-metrics", "127.0.0.1:notaport"}, nil)
	assert.Equal(t, job.ExitFailed, out.code)
	assert.Empty(t, out.stdout)
	assert.Contains(t, out.stderr, "flights: -metrics: listen tcp")
}
