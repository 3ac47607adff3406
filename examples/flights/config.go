package main

import (
	"flag"
	"io"
	"time"

	"github.com/aggflow/aggflow/examples/flights/internal/job"
)

// config is the command line.
type config struct {
	job.Config
	source      sourceKind    // how the flights reach the dispatcher
	metrics     string        // host:port to serve /metrics on; "" for none
	metricsHold time.Duration // how long /metrics stays served after the summary
}

// program is the command line's name, usage and own flags.
func program(c *config) job.Program {
	return job.Program{Name: "flights", About: `Replays US flight records through an aggflow dispatcher, one aggregate per
origin airport, then checks the per-airport state against a sequential fold.
SIGINT (Ctrl-C) or SIGTERM drains the dispatcher and exits 130 or 143; a
second signal stops it by force.`,
		Flags: func(fs *flag.FlagSet) func() string {
			fs.Var(job.Choice[sourceKind]{V: &c.source, Names: sourceKinds}, "source", "how the flights reach the dispatcher, a `kind`: flux (flux.FromSeq) or rxgo (an rxgo.Observable through flux.FromObservable, the outcomes read back as an rxgo.Observable and checked against the dispatcher's Stats); jetstream is a program of its own, go run ./examples/flights/jetstream")
			fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics on http://`host:port`/metrics during the run (port 0 picks one; the address is printed on stderr)")
			fs.DurationVar(&c.metricsHold, "metrics-hold", 0, "with -metrics, keep serving for this `duration` after the summary; SIGINT or SIGTERM ends the hold early")
			return func() string {
				switch {
				case c.source == sourceJetstream:
					return "-source jetstream is a program of its own: go run ./examples/flights/jetstream"
				case c.metricsHold < 0:
					return "-metrics-hold must not be negative"
				case c.metricsHold > 0 && c.metrics == "":
					return "-metrics-hold needs -metrics"
				}
				return ""
			}
		}}
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	err := program(&c).Parse(args, stderr, &c.Config)
	return c, err
}
