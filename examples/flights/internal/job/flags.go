package job

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/aggflow/aggflow/aggregate"
	"github.com/aggflow/aggflow/dispatch"
	"github.com/aggflow/aggflow/schedulers"
)

// errUsage reports a command line that cannot run; flag has already
// printed the details.
var errUsage = errors.New("flights: usage")

// Config is the command line both programs share: the input and the
// dispatcher's settings.
type Config struct {
	Input       string        // "" for the embedded sample
	Parallelism int           // dispatcher groups
	Pool        int           // scheduler goroutines
	MaxPending  int           // the dispatcher's pending budget, in exchanges
	HandlerCost time.Duration // CPU burnt per exchange
	JSON        bool          // summary as JSON
	Strict      bool          // an unknown JSON field fails the run
	Progress    ProgressMode  // when to draw progress bars
}

// Program is what a command adds to the shared command line: its name
// and the text of its usage, and its own flags.
type Program struct {
	Name, About string
	// Flags, when set, registers the program's flags on fs and returns
	// their check (nil for none), called once args parsed: what is wrong
	// with them, or "".
	Flags func(fs *flag.FlagSet) (check func() string)
}

// Parse parses args into c and p's own flags, printing the usage and what
// is wrong on stderr. It returns flag.ErrHelp for -help, and another error
// for a command line that cannot run.
func (p Program) Parse(args []string, stderr io.Writer, c *Config) error {
	fs := flag.NewFlagSet(p.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n\n%s\n", p.Name, p.About)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Input, "input", "", "`file` to replay: .json, .json.gz or .parquet (default: the embedded 20,000-flight sample)")
	fs.IntVar(&c.Parallelism, "parallelism", aggregate.DefaultParallelism, "dispatcher `groups`")
	fs.IntVar(&c.Pool, "pool", schedulers.DefaultPoolSize, "scheduler `goroutines`")
	fs.IntVar(&c.MaxPending, "max-pending", dispatch.DefaultMaxPending, "the dispatcher's pending budget, in `exchanges` admitted and not finished")
	fs.DurationVar(&c.HandlerCost, "handler-cost", 0, "CPU time burnt per exchange, e.g. 2us")
	fs.BoolVar(&c.JSON, "json", false, "print the summary as JSON")
	fs.BoolVar(&c.Strict, "strict", false, "fail on a JSON record with a field other than date, delay, distance, origin and destination (by default such fields are skipped)")
	fs.Var(Choice[ProgressMode]{&c.Progress, progressModes}, "progress", "progress bars on stderr while decoding and dispatching, a `mode`: auto (when stderr is a terminal and the input large), always or never")
	check := func() string { return "" }
	if p.Flags != nil {
		if own := p.Flags(fs); own != nil {
			check = own
		}
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return errUsage
	}
	var problem string
	switch {
	case fs.NArg() > 0:
		problem = fmt.Sprintf("unexpected argument %q", fs.Arg(0))
	case c.Parallelism < 1:
		problem = "-parallelism must be at least 1"
	case c.Pool < 1:
		problem = "-pool must be at least 1"
	case c.MaxPending < 1:
		problem = "-max-pending must be at least 1"
	case c.HandlerCost < 0:
		problem = "-handler-cost must not be negative"
	default:
		if problem = check(); problem == "" {
			return nil
		}
	}
	fmt.Fprintln(stderr, p.Name+":", problem)
	fs.Usage()
	return errUsage
}

// Visited says whether the flag name was set on fs's command line.
func Visited(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
