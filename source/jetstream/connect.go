package jetstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// MinServerVersion is the oldest nats-server the consumer works with: the
// consumer reset API ($JS.API.CONSUMER.RESET, js.ResetConsumer) came in
// 2.14.0; the pinned-client priority policy and the unpin API in 2.11.0.
const MinServerVersion = "2.14.0"

// Connect connects to the server at url (a comma-separated list for a
// cluster) and returns the connection and its JetStream context; close the
// connection once the consumers using it are done. A url that cannot be
// parsed returns an error wrapping ErrInvalidArgument; a server that does
// not answer, ErrUnreachable; a server older than MinServerVersion,
// ErrServerVersion, at once (its version is in the INFO it sends first).
// Either names url.
func Connect(url string, opts ...nats.Option) (*nats.Conn, natsjs.JetStream, error) {
	if strings.TrimSpace(url) == "" {
		return nil, nil, fmt.Errorf("%w: server URL %q", ErrInvalidArgument, url)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		if badURL(err) {
			return nil, nil, fmt.Errorf("%w: server URL %q: %w", ErrInvalidArgument, url, err)
		}
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, url, err)
	}
	if err := checkVersion(nc); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("%w (%s)", err, url)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %s: %w", url, err)
	}
	return nc, js, nil
}

// badURL reports whether the client refused a URL or an address as
// malformed, before any server could answer.
func badURL(err error) bool {
	var ue *url.Error
	var ae *net.AddrError
	return errors.As(err, &ue) || errors.As(err, &ae)
}

// checkVersion refuses a connected server older than MinServerVersion. A
// connection not connected (closed, reconnecting) has no version to check:
// its requests will say why.
func checkVersion(nc *nats.Conn) error {
	v := nc.ConnectedServerVersion()
	if v == "" {
		return nil
	}
	got, ok := parseVersion(v)
	want, _ := parseVersion(MinServerVersion)
	if !ok || compareVersions(got, want) < 0 {
		return fmt.Errorf("%w: the server is nats-server %q, the consumer needs %s or later (the consumer reset API)",
			ErrServerVersion, v, MinServerVersion)
	}
	return nil
}

// parseVersion reads "major.minor.patch", with an optional "v" before and
// a pre-release or build suffix after ("2.14.0-RC.2" reads as 2.14.0).
func parseVersion(v string) ([3]int, bool) {
	var n [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return n, false
	}
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return n, false
		}
		n[i] = x
	}
	return n, true
}

func compareVersions(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			return a[i] - b[i]
		}
	}
	return 0
}

// unreachable reports whether err says that no server (or no JetStream)
// answered: the connection is closed or down, nobody listens on the API's
// subject, or a request's own timeout passed. (A caller's deadline is told
// apart where the caller's ctx is known: see Consumer.setUp.)
func unreachable(err error) bool {
	for _, e := range []error{nats.ErrNoServers, nats.ErrConnectionClosed, nats.ErrTimeout, nats.ErrNoResponders,
		natsjs.ErrJetStreamNotEnabled, natsjs.ErrJetStreamNotEnabledForAccount, nats.ErrDisconnected} {
		if errors.Is(err, e) {
			return true
		}
	}
	return errors.Is(err, context.DeadlineExceeded)
}
