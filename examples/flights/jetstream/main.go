// Command flights-jetstream is the flights job scaled out on NATS
// JetStream: it publishes the flights to an embedded JetStream server,
// keyed by origin airport on 8 partitions, and consumes them in two
// consumer processes (the program re-executed), whose airport states are
// merged and verified against a sequential fold of the same input, as the
// in-process job (examples/flights) does; the flags, the summary and the
// exit statuses are that job's. It is a module of its own so that the
// in-process job builds no broker.
//
// Usage:
//
//	go run ./examples/flights/jetstream [-input FILE.json|FILE.json.gz|FILE.parquet] [-strict] [-assign static|dynamic [-lease-ttl 2s]] [-parallelism N] [-pool N] [-max-pending N] [-handler-cost 2us] [-progress auto|always|never] [-json]
//
// Without -input it replays the 20,000-flight sample embedded in the
// binary. With -assign static (the default) each process is told its 4
// partitions; with -assign dynamic the two are members a and b of a
// dynamic assignment (leases of -lease-ttl in a KV bucket): a claims all 8
// partitions and folds the first half of the flights, b joins and takes 4
// by a graceful handoff, each airport's state following its partition, and
// the second half is published then. SIGINT (Ctrl-C) or SIGTERM stops the consumers gracefully
// and prints a summary marked PARTIAL, exiting 130 or 143; a second signal
// kills them. The exit status is 0 only when nothing was lost, no ordering
// violation was seen and the state was verified; 1 for bad input or a
// failed check; 2 for a bad command line.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/examples/flights/internal/job"
	"github.com/aggflow/aggflow/source/jetstream"
)

func main() {
	if url := os.Getenv(consumerEnv); url != "" { // a consumer process
		os.Exit(consumerMain(url, os.Args[1:], os.Stdout, os.Stderr))
	}
	e, stop := job.ProcessEnv()
	status := run(os.Args[1:], e)
	stop()
	os.Exit(status)
}

// config is the command line.
type config struct {
	job.Config
	assign   assignMode    // how the consumer processes share the partitions
	leaseTTL time.Duration // the leases' under -assign dynamic
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	p := job.Program{Name: "flights-jetstream", About: `Replays US flight records through NATS JetStream: an embedded server, 8
partitions keyed by origin airport, two consumer processes (this program
re-executed) running aggflow dispatchers, one aggregate per origin airport;
then checks the merged per-airport state against a sequential fold.
SIGINT (Ctrl-C) or SIGTERM stops the consumers gracefully and exits 130 or
143; a second signal kills them.`,
		Flags: func(fs *flag.FlagSet) func() string {
			fs.Var(job.Choice[assignMode]{V: &c.assign, Names: assignModes}, "assign", "how the two consumer processes share the partitions, a `mode`: static (4 each, told) or dynamic (members a and b claim them through leases of -lease-ttl; b joins once a holds all 8 and takes its half by a graceful handoff, the airports' states following their partitions)")
			fs.DurationVar(&c.leaseTTL, "lease-ttl", leaseTTL, "with -assign dynamic, the members' lease `TTL`, at least jetstream.MinLeaseTTL: they renew every quarter of it, the handoff takes about half of it, and a member that cannot renew within it loses its partitions")
			return func() string {
				switch {
				case c.leaseTTL < jetstream.MinLeaseTTL:
					return fmt.Sprintf("-lease-ttl must be at least %v (jetstream.MinLeaseTTL)", jetstream.MinLeaseTTL)
				case c.assign != assignDynamic && job.Visited(fs, "lease-ttl"):
					return "-lease-ttl is -assign dynamic's: not with -assign " + assignModes[c.assign]
				}
				return ""
			}
		}}
	err := p.Parse(args, stderr, &c.Config)
	return c, err
}

// run is the program with its surroundings made explicit; it returns the
// exit status.
func run(args []string, e job.Env) int {
	cfg, err := parseFlags(args, e.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return job.ExitOK // -help asked for the usage: not a failure
	} else if err != nil {
		return job.ExitUsage
	}
	status, _ := job.Execute(cfg.Config, e, func(data *flightdata.Dataset, states []job.StateSlot) (job.Replayed, error) {
		fmt.Fprintf(e.Stderr, "flights-jetstream: publishing %s to an embedded nats-server\n", job.Count(int64(len(data.Flights)), "flight"))
		return replayJetStream(cfg, data, states, e)
	})
	return status
}
