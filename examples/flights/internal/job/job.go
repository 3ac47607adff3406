// Package job is what the flights programs share: the command line of the
// dispatcher, the decoding of the input (the embedded sample by default),
// the summary and its verification against a sequential fold, the exit
// statuses, signals and progress bars. Each program brings its way of
// getting the flights through a dispatcher, a Replay: in process
// (examples/flights), or through a broker and consumer processes
// (examples/flights/jetstream).
package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aggflow/aggflow/examples/flights/data"
	"github.com/aggflow/aggflow/examples/flights/internal/airport"
	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
)

// busiestShown is the length of the busiest-airports table.
const busiestShown = 10

// decodeBarWorth is the input size, in bytes as stored, from which a
// decoding progress bar is drawn under -progress auto.
const decodeBarWorth = 4 << 20

// Env is what the program talks to.
type Env struct {
	Stdout, Stderr io.Writer
	// Interrupt delivers one value per SIGINT or SIGTERM.
	Interrupt <-chan os.Signal
}

// Replay gets data's flights through a dispatcher, in file order, each
// folded into states[its origin airport], and returns once nothing touches
// states any more; its error is a failure before the run began (the
// summary is not written). It takes the stop signals from the Interrupt
// of the Env given to Execute: a first drains, a second forces.
type Replay func(data *flightdata.Dataset, states []StateSlot) (Replayed, error)

// Replayed is the outcome of a Replay.
type Replayed struct {
	// Source names how the flights came (-source); SourceLine, the
	// summary's source line, says it and how the outcomes were counted.
	Source, SourceLine string
	// Lines are more lines of the summary after the source line.
	Lines   []Line
	Counts  Counts
	Elapsed time.Duration
	Signal  os.Signal // the first signal, which drained the dispatcher; nil if none came
	Forced  bool      // a second one stopped it by force
	Err     error
	// Replays counts the exchanges received again and skipped (at or below
	// their airport's last position): in Counts, not flights lost.
	Replays             int64
	QueueWait, Handling Percentiles
	// ReadBack and Broker, when not nil, are the JSON summary's read_back
	// and broker.
	ReadBack, Broker any
}

// Line is a line of the text summary: "label  text".
type Line struct{ Label, Text string }

// Execute decodes cfg's input, replays it through play, verifies the
// states against a sequential fold (unless a signal stopped the run) and
// writes the summary on e.Stdout, as text or JSON (cfg.JSON), the errors on
// e.Stderr; it returns the exit status and whether the summary of a
// complete run (no signal stopped it) was written. A signal while decoding
// ends the run before play. The states are one StateSlot per airport of
// the input, 64 bytes of padding each.
func Execute(cfg Config, e Env, play Replay) (status int, complete bool) {
	stdout, stderr := e.Stdout, e.Stderr
	start := time.Now()
	data, err := decode(cfg, e)
	if stop := (*signalled)(nil); errors.As(err, &stop) {
		fmt.Fprintf(stderr, "%v while decoding; nothing was dispatched\n", stop)
		return SignalStatus(stop.sig), false
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFailed, false
	}
	s := Summary{
		Input: inputName(cfg), Rows: int64(len(data.Flights)),
		Airports: data.Origins(), AirportsNamed: len(data.Airports),
		Parallelism: cfg.Parallelism, Pool: cfg.Pool, HandlerCost: cfg.HandlerCost,
		Decode: time.Since(start),
	}

	states := make([]StateSlot, len(data.Airports))
	res, err := play(data, states)
	if err != nil {
		fmt.Fprintln(stderr, "flights:", err)
		return ExitFailed, false
	}
	s.Source, s.sourceLine, s.lines = res.Source, res.SourceLine, res.Lines
	s.ReadBack, s.Broker = res.ReadBack, res.Broker
	s.stoppedBy(res.Signal, res.Forced)
	s.account(res.Counts, res.Replays, res.Elapsed)
	if res.Err != nil {
		s.Error = res.Err.Error()
	}
	s.QueueWait, s.Handling = res.QueueWait, res.Handling
	state := func(i int) airport.State { return states[i].State }
	s.tally(data, state, busiestShown)

	s.Verification = Skipped
	if !s.Partial {
		start := time.Now()
		s.Difference = airport.Diff(data.Airports, airport.Fold(data), state)
		s.Verify = time.Since(start)
		s.Verification = Verified
		if s.Difference != "" {
			s.Verification = NotVerified
		}
	}

	write := s.writeText
	if cfg.JSON {
		write = s.writeJSON
	}
	if err := write(stdout); err != nil {
		fmt.Fprintln(stderr, "flights:", err)
		return ExitFailed, false
	}
	return s.exitCode(), !s.Partial
}

// inputName names the input in output.
func inputName(cfg Config) string {
	if cfg.Input == "" {
		return data.SampleName
	}
	return cfg.Input
}

// decode reads the input named by cfg, or the embedded sample, drawing a
// progress bar on e.Stderr as cfg.Progress says. A signal on e.Interrupt
// during decoding cancels it and gives a *signalled error, even if decoding
// had just finished: the signal is not lost.
func decode(cfg Config, e Env) (*flightdata.Dataset, error) {
	in, err := openInput(cfg)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	decoded := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		select {
		case sig := <-e.Interrupt:
			cancel(&signalled{sig})
		case <-decoded:
			select { // one that came as decoding ended still counts
			case sig := <-e.Interrupt:
				cancel(&signalled{sig})
			default:
			}
		}
	})
	var read atomic.Int64
	stopBar := StartProgress(e.Stderr, cfg.Progress,
		Bar{Description: "decoding", Total: in.Size(), Worth: decodeBarWorth, Unit: "bytes"}, read.Load)
	data, err := in.Decode(ctx, flightdata.Options{Strict: cfg.Strict, Progress: &read})
	stopBar(err == nil)
	close(decoded)
	watcher.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return nil, cause
	}
	return data, err
}

// openInput opens the input named by cfg, or the embedded sample.
func openInput(cfg Config) (*flightdata.Input, error) {
	if cfg.Input == "" {
		return data.OpenSample()
	}
	return flightdata.Open(cfg.Input)
}
