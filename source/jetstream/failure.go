package jetstream

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/aggflow/aggflow/partition"
)

// Headers of a dead letter, besides the original message's (KeyHeader
// among them): where it comes from, why and after how many attempts. The
// Kafka binding's dead letters carry the same names.
const (
	DeadLetterStreamHeader   = "Aggflow-Source-Stream"
	DeadLetterSubjectHeader  = "Aggflow-Source-Subject"
	DeadLetterSequenceHeader = "Aggflow-Source-Sequence"
	DeadLetterErrorHeader    = "Aggflow-Error"
	DeadLetterAttemptsHeader = "Aggflow-Attempts"
)

// WithFailurePolicy sets what becomes of a message whose handler failed
// (returned an error or panicked): by default it is settled, acknowledged
// past with a WARN line (at most one per partition a second) and counted
// in Stats.Failures. See partition.FailurePolicy: retries in place hold the
// message's group (and the aggregates that share it) and keep the
// partition's acknowledgements below it until it ends.
//
// partition.DeadLetter(subject) publishes the message to subject, which a
// stream other than the topology's must capture, with js.PublishMsg: its
// payload and headers, DeadLetterStreamHeader, DeadLetterSubjectHeader and
// DeadLetterSequenceHeader naming the source, DeadLetterErrorHeader the
// last error (on one line) and DeadLetterAttemptsHeader the attempt, and a
// Nats-Msg-Id of "<stream>-<sequence>" so that a stream's duplicate window
// drops a dead letter published again. The message is read back from the
// stream by its sequence (one request), and is acknowledged only once the
// PubAck came; each request is bounded by the request timeout, and a
// failed one is tried again as the policy says. partition.Stop() fails the
// consumer (Err wraps partition.ErrHandlerFailed), acknowledging what came
// before the message in its partition.
//
// An invalid policy, or a dead-letter subject that is not a literal
// subject or is one of the topology's, makes NewConsumer return
// ErrInvalidArgument.
func WithFailurePolicy(p partition.FailurePolicy) Option {
	return func(c *config) {
		f := &failing{policy: p}
		c.failing = f
		c.partition = append(c.partition, partition.WithFailurePolicy(p),
			partition.WithFailureActions(partition.FailureActions{
				DeadLetter: func(ctx context.Context, l partition.Letter) error { return f.c.deadLetter(ctx, l) },
				Stop:       func(err error) { f.c.fail(err) },
			}))
	}
}

// failing is one consumer's failure policy: its actions call the consumer
// that bind gave it, before any handler runs.
type failing struct {
	policy partition.FailurePolicy
	c      failer
}

// failer is what a failure policy's actions call: the Consumer.
type failer interface {
	deadLetter(ctx context.Context, l partition.Letter) error
	fail(err error)
}

// bind checks the dead-letter subject against the consumer's partition
// subjects (partitions.*) and gives the policy c, the consumer named name;
// without a policy (nil) it does nothing.
func (f *failing) bind(c failer, name, partitions string) error {
	if f == nil {
		return nil
	}
	if to := f.policy.DeadLetterTo(); to != "" && (strings.ContainsAny(to, "*> \t\r\n") ||
		strings.HasPrefix(to, ".") || strings.HasSuffix(to, ".") || strings.Contains(to, "..") ||
		strings.HasPrefix(to, partitions+".")) {
		return fmt.Errorf("%w: consumer %q: dead-letter subject %q is not a literal subject outside the partitions %s.*",
			ErrInvalidArgument, name, to, partitions)
	}
	f.c = c
	return nil
}

// deadLetter reads the letter's message back from the stream and publishes
// it to the dead-letter subject, waiting for the PubAck.
func (c *Consumer[T]) deadLetter(ctx context.Context, l partition.Letter) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.timeout)
	defer cancel()
	m, err := c.stream.GetMsg(ctx, uint64(l.Position))
	if err != nil {
		return fmt.Errorf("jetstream: consumer %q: reading stream sequence %d back: %w", c.name, l.Position, err)
	}
	h := nats.Header{}
	for k, vs := range m.Header {
		h[k] = append([]string(nil), vs...)
	}
	h.Set(DeadLetterStreamHeader, c.topo.Stream)
	h.Set(DeadLetterSubjectHeader, m.Subject)
	h.Set(DeadLetterSequenceHeader, strconv.FormatInt(l.Position, 10))
	h.Set(DeadLetterErrorHeader, oneLine(l.Err.Error()))
	h.Set(DeadLetterAttemptsHeader, strconv.Itoa(l.Attempt))
	h.Del(nats.MsgIdHdr) // WithMsgID sets the dead letter's own
	_, err = c.js.PublishMsg(ctx, &nats.Msg{Subject: l.To, Header: h, Data: m.Data},
		natsjs.WithMsgID(c.topo.Stream+"-"+strconv.FormatInt(l.Position, 10)))
	if err != nil {
		return fmt.Errorf("jetstream: consumer %q: publishing stream sequence %d to %q: %w", c.name, l.Position, l.To, err)
	}
	return nil
}

// oneLine makes s a header value: no line breaks.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", "; ", "\n", "; ", "\r", "; ").Replace(s)
}
