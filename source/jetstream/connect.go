package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// MinServerVersion is the oldest nats-server the consumer works with: the
// consumer reset API ($JS.API.CONSUMER.RESET, js.ResetConsumer) came in
// 2.14.0; the pinned-client priority policy and the unpin API in 2.11.0.
const MinServerVersion = "2.14.0"

// Connect connects to the server at url (a comma-separated list for a
// cluster) and returns the connection and its JetStream context; close the
// connection once the consumers using it are done. A server that does not
// answer returns an error wrapping ErrUnreachable.
func Connect(url string, opts ...nats.Option) (*nats.Conn, natsjs.JetStream, error) {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, url, err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %s: %w", url, err)
	}
	return nc, js, nil
}

// unreachable reports whether err says that no server (or no JetStream)
// answered.
func unreachable(err error) bool {
	for _, e := range []error{nats.ErrNoServers, nats.ErrConnectionClosed, nats.ErrTimeout, nats.ErrNoResponders,
		natsjs.ErrJetStreamNotEnabled, natsjs.ErrJetStreamNotEnabledForAccount, nats.ErrDisconnected} {
		if errors.Is(err, e) {
			return true
		}
	}
	return errors.Is(err, context.DeadlineExceeded)
}
