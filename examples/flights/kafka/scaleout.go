package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/examples/flights/internal/flightdata"
	"github.com/aggflow/aggflow/source/kafka/kafkatest"
)

// scaled is what the members reported, with the phases' durations.
type scaled struct {
	brokers          string
	reports          []report
	produce, consume time.Duration
}

// pollEvery is how often the coordinator looks at the group's state.
const pollEvery = 20 * time.Millisecond

// scaleOut runs the cluster (kfake unless cfg names brokers), the members,
// the production and the wait for the group's commits.
func scaleOut(ctx context.Context, cfg config, data *flightdata.Dataset, stderr io.Writer) (scaled, error) {
	name := runName()
	brokers := cfg.brokers
	if len(brokers) == 0 {
		c, err := kafkatest.Start()
		if err != nil {
			return scaled{}, err
		}
		defer c.Close()
		brokers = c.Addrs()
	}
	res := scaled{brokers: fmt.Sprint(brokers)}
	if len(cfg.brokers) == 0 {
		res.brokers = "kfake in this process on " + res.brokers
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(name), kgo.ProducerLinger(0))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, int32(cfg.partitions), -1, nil, name)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return res, fmt.Errorf("create topic %s: %w", name, err)
	}
	if len(cfg.brokers) > 0 {
		defer func() { _, _ = adm.DeleteTopics(context.Background(), name) }()
	}

	ms := make([]*member, cfg.members)
	for i := range ms {
		args := memberArgs{name: "member-" + strconv.Itoa(i+1), brokers: brokers, group: name, topic: name, airports: len(data.Airports)}
		if ms[i], err = startMember(args, stderr); err != nil {
			return res, err
		}
	}
	defer func() {
		for _, m := range ms {
			if m != nil {
				m.kill()
			}
		}
	}()
	if err := waitAssigned(ctx, adm, name, cfg.members); err != nil {
		return res, err
	}

	start := time.Now()
	end, err := produce(ctx, cl, data)
	if err != nil {
		return res, err
	}
	res.produce = time.Since(start)
	if err := waitCommitted(ctx, adm, name, end); err != nil {
		return res, err
	}
	res.consume = time.Since(start)
	for i, m := range ms {
		r, err := m.stop(ctx)
		if err != nil {
			return res, err
		}
		res.reports = append(res.reports, r)
		ms[i] = nil
	}
	return res, nil
}

// produce writes every flight keyed by its origin airport and returns the
// end offset of each partition.
func produce(ctx context.Context, cl *kgo.Client, data *flightdata.Dataset) (map[int32]int64, error) {
	end := map[int32]int64{}
	const chunk = 10_000
	for lo := 0; lo < len(data.Flights); lo += chunk {
		fs := data.Flights[lo:min(lo+chunk, len(data.Flights))]
		rs := make([]*kgo.Record, len(fs))
		for i, f := range fs {
			rs[i] = &kgo.Record{Key: []byte(data.Code(f.Origin)), Value: encode(f)}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return nil, fmt.Errorf("produce: %w", err)
		}
		for _, r := range rs {
			end[r.Partition] = max(end[r.Partition], r.Offset+1)
		}
	}
	return end, nil
}

// waitAssigned waits until each of n members owns at least one partition.
func waitAssigned(ctx context.Context, adm *kadm.Client, group string, n int) error {
	return poll(ctx, "the group to assign partitions to every member", func() (bool, error) {
		gs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return false, nil // the group may not exist yet
		}
		g := gs[group]
		if g.State != "Stable" || len(g.Members) != n {
			return false, nil
		}
		for _, m := range g.Members {
			c, ok := m.Assigned.AsConsumer()
			if !ok || len(c.Topics) == 0 || len(c.Topics[0].Partitions) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitCommitted waits until the group committed the end of every
// partition.
func waitCommitted(ctx context.Context, adm *kadm.Client, group string, end map[int32]int64) error {
	return poll(ctx, "the group to commit every flight", func() (bool, error) {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, nil
		}
		for p, e := range end {
			if o, ok := offs.Lookup(group, p); !ok || o.At < e {
				return false, nil
			}
		}
		return true, nil
	})
}

func poll(ctx context.Context, what string, done func() (bool, error)) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// member is a consumer process.
type member struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	waited         chan error
	once           sync.Once
}

func startMember(args memberArgs, stderr io.Writer) (*member, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	m := &member{cmd: exec.Command(exe), waited: make(chan error, 1)}
	m.cmd.Env = append(os.Environ(), memberEnv+"="+args.String())
	m.cmd.Stdout, m.cmd.Stderr = &m.stdout, io.MultiWriter(&m.stderr, stderr)
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", args.name, err)
	}
	go func() { m.waited <- m.cmd.Wait() }()
	return m, nil
}

// stop sends SIGTERM and reads the report.
func (m *member) stop(ctx context.Context) (report, error) {
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return report{}, err
	}
	var err error
	select {
	case err = <-m.waited:
	case <-ctx.Done():
		m.kill()
		return report{}, fmt.Errorf("a member did not stop: %w", ctx.Err())
	}
	var r report
	if jerr := json.Unmarshal(m.stdout.Bytes(), &r); jerr != nil {
		return r, fmt.Errorf("a member's report (exit %v): %w", err, jerr)
	}
	if err != nil {
		return r, fmt.Errorf("%s: %v: %s", r.Name, err, r.Error)
	}
	return r, nil
}

// kill ends a member that is still running and waits for it.
func (m *member) kill() {
	m.once.Do(func() {
		if m.cmd.ProcessState == nil {
			_ = m.cmd.Process.Kill()
			<-m.waited
		}
	})
}
