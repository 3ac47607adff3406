package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aggflow/aggflow/component"
)

// ErrInvalidArgument is returned for a topic without a name or partitions,
// or a broker count below 1.
var ErrInvalidArgument = errors.New("kafkatest: invalid argument")

// closeWait bounds how long Close waits for the cluster's connections to
// end once it told them to.
const closeWait = 5 * time.Second

// Cluster is a fake Kafka cluster in this process. Its methods are safe for
// concurrent use.
type Cluster struct {
	fake  *kfake.Cluster
	addrs []string
	conns sync.WaitGroup // listeners and accepted connections
	once  sync.Once
}

// Option configures Start.
type Option func(*config)

type config struct {
	brokers int
	topics  map[string]int32
	ports   []int
	fake    []kfake.Opt
}

// WithBrokers sets the number of brokers (default 1).
func WithBrokers(n int) Option { return func(c *config) { c.brokers = n } }

// WithTopic creates topic with partitions partitions at start.
func WithTopic(topic string, partitions int32) Option {
	return func(c *config) { c.topics[topic] = partitions }
}

// WithPorts listens on these loopback ports, one broker each (default: a
// free port per broker).
func WithPorts(ports ...int) Option { return func(c *config) { c.ports = ports } }

// WithFakeOptions passes options to kfake.
func WithFakeOptions(opts ...kfake.Opt) Option {
	return func(c *config) { c.fake = append(c.fake, opts...) }
}

// Start starts a cluster listening on 127.0.0.1. Close it when done.
func Start(opts ...Option) (*Cluster, error) {
	c := config{brokers: 1, topics: map[string]int32{}}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.brokers < 1 {
		return nil, fmt.Errorf("%w: %d brokers", ErrInvalidArgument, c.brokers)
	}
	for t, n := range c.topics {
		if t == "" || n < 1 {
			return nil, fmt.Errorf("%w: topic %q with %d partitions", ErrInvalidArgument, t, n)
		}
	}
	cl := &Cluster{}
	fopts := []kfake.Opt{kfake.NumBrokers(c.brokers), kfake.ListenFn(cl.listen)}
	if len(c.ports) > 0 {
		fopts = append(fopts, kfake.Ports(c.ports...))
	}
	for t, n := range c.topics {
		fopts = append(fopts, kfake.SeedTopics(n, t))
	}
	fake, err := kfake.NewCluster(append(fopts, c.fake...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: start: %w", err)
	}
	cl.fake, cl.addrs = fake, fake.ListenAddrs()
	return cl, nil
}

// Addrs returns the seed addresses, "127.0.0.1:port", one per broker.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Fake returns the kfake cluster, for its control functions (delaying or
// failing requests).
func (c *Cluster) Fake() *kfake.Cluster { return c.fake }

// CreateTopic creates topic with partitions partitions.
func (c *Cluster) CreateTopic(ctx context.Context, topic string, partitions int32) error {
	if topic == "" || partitions < 1 {
		return fmt.Errorf("%w: topic %q with %d partitions", ErrInvalidArgument, topic, partitions)
	}
	return c.withClient(func(cl *kgo.Client) error {
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("kafkatest: create topic %q: %w", topic, err)
		}
		return nil
	})
}

// Produce writes records synchronously, each to the topic it names (or
// topic when it names none), partitioned by franz-go's default partitioner
// (murmur2 of the key, Kafka's default).
func (c *Cluster) Produce(ctx context.Context, topic string, records ...*kgo.Record) error {
	return c.withClient(func(cl *kgo.Client) error {
		if err := cl.ProduceSync(ctx, records...).FirstErr(); err != nil {
			return fmt.Errorf("kafkatest: produce to %q: %w", topic, err)
		}
		return nil
	}, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
}

// Committed returns the offsets group committed for topic, by partition.
func (c *Cluster) Committed(ctx context.Context, group, topic string) (map[int32]int64, error) {
	out := map[int32]int64{}
	err := c.withClient(func(cl *kgo.Client) error {
		resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("kafkatest: committed offsets of %q: %w", group, err)
		}
		for p, o := range resp[topic] {
			out[p] = o.At
		}
		return nil
	})
	return out, err
}

// withClient runs f with a client of the cluster, closed when f returns.
func (c *Cluster) withClient(f func(*kgo.Client) error, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs...)}, opts...)...)
	if err != nil {
		return fmt.Errorf("kafkatest: client: %w", err)
	}
	defer cl.Close()
	return f(cl)
}

// Close shuts the cluster down and waits, up to 5 s, for its listeners and
// connections to end (close the clients first: a connection ends when its
// client or the cluster closes it). Calls after the first do nothing.
func (c *Cluster) Close() {
	c.once.Do(func() {
		c.fake.Close()
		done := make(chan struct{})
		component.Go(func() error { c.conns.Wait(); return nil }, func(error) { close(done) })
		timer := time.NewTimer(closeWait)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
		}
	})
}

// listen is kfake's ListenFn: it counts the listener and every connection
// it accepts until they are closed.
func (c *Cluster) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	c.conns.Add(1)
	return &listener{Listener: ln, c: c}, nil
}

type listener struct {
	net.Listener
	c    *Cluster
	once sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.c.conns.Add(1)
	return &countedConn{Conn: conn, wg: &l.c.conns}, nil
}

func (l *listener) Close() error {
	err := l.Listener.Close()
	l.once.Do(l.c.conns.Done)
	return err
}

type countedConn struct {
	net.Conn
	wg   *sync.WaitGroup
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.wg.Done)
	return err
}
