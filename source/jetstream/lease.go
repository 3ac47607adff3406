package jetstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// pinGroup is the priority group of the durable consumers: the server pins
// each to its owner's pull requests.
const pinGroup = "aggflow"

// MinLeaseTTL is the shortest lease WithDynamicAssignment and
// WithStaticLease accept: the server expires keys on a timer of at least
// 250 ms, and the renewals (every quarter of the TTL) must fit in the lease
// with the margin.
const MinLeaseTTL = time.Second

// memberName is what a member may be called: a KV key token.
var memberName = regexp.MustCompile(`^[A-Za-z0-9_=-]+$`)

// defaultMember is a static assignment's member name when none is given:
// the consumer's name, the host's, the process id and 4 random bytes, so
// that no two processes (nor two consumers of one) share it.
func defaultMember(name string) string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails
	return memberToken(name) + "-" + memberToken(host) + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// memberToken maps s to the characters a member name may have.
func memberToken(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 128 && (r == '-' || r == '_' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return r
		}
		return '-'
	}, s)
	if s == "" {
		return "x"
	}
	return s
}

// bucketName is what a KV bucket may be called.
var bucketName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// leaseBucket returns the name of the KV bucket of the leases and members
// of the durable consumers "<durable>-<p>".
func leaseBucket(durable string) string { return durable + "-leases" }

func leaseKey(p int32) string        { return "p." + strconv.Itoa(int(p)) }
func memberKey(member string) string { return "m." + member }

// parseLease reads a lease's value: "<member>" as claimed, "<member>
// <epoch>" once renewed; the epoch of a value without one is the entry's
// revision (the claim's).
func parseLease(value []byte, revision uint64) (member string, epoch uint64) {
	member, e, ok := strings.Cut(string(value), " ")
	if ok {
		if n, err := strconv.ParseUint(e, 10, 64); err == nil {
			return member, n
		}
	}
	return member, revision
}

// base is the origin of the monotonic times of the leases.
var base = time.Now()

// mono returns the monotonic time, in nanoseconds since base.
func mono() int64 { return int64(time.Since(base)) }

// lease is a partition's claim in the KV bucket, as its owner sees it. It
// is valid until deadline: the monotonic time at which the owner sent its
// last confirmed claim or renewal, plus the TTL, minus the margin. The
// server keeps the key TTL after it stored that write, which is after it
// was sent, so the key outlives the local deadline by the margin at least;
// another member can create it only once it is gone. Once seen passed (or
// lost otherwise), the lease is dead for good.
type lease struct {
	p      int32
	member string
	epoch  uint64 // the claim's revision
	fence  bool   // false: the control of the tests, always valid

	mu       sync.Mutex // serialises renewals and the release, which hold rev
	rev      uint64
	released bool

	deadline atomic.Int64
	alive    context.Context // cancelled once the lease is dead
	kill     context.CancelFunc
}

func newLease(p int32, member string, rev uint64, deadline int64, fence bool) *lease {
	l := &lease{p: p, member: member, epoch: rev, rev: rev, fence: fence}
	l.alive, l.kill = context.WithCancel(context.Background())
	l.deadline.Store(deadline)
	return l
}

// valid reports whether the owner may still hand exchanges to the handler
// and acknowledge: the deadline has not passed and nothing lost the lease.
// One atomic load and a clock read.
func (l *lease) valid() bool {
	if !l.fence {
		return true
	}
	if l.alive.Err() != nil {
		return false
	}
	if mono() < l.deadline.Load() {
		return true
	}
	l.kill()
	return false
}

// extend moves the deadline to d, unless the lease is dead already.
func (l *lease) extend(d int64) {
	if l.valid() && d > l.deadline.Load() {
		l.deadline.Store(d)
	}
}

// Lease is a partition's lease as its handler sees it, from LeaseOf: the
// member that holds it and its epoch, the KV revision of the claim, which
// grows with every claim of the partition (by any member). An idempotent
// handler can fence its writes on it: a store that refuses a write of an
// epoch below the highest it saw for the partition refuses a stalled old
// owner's.
type Lease struct {
	Partition int32
	Member    string
	Epoch     uint64
	l         *lease
}

// Valid reports whether the lease is still valid by the owner's clock (see
// the fence in the package doc). A handler that must not act once the lease
// passed checks it before its side effect; the epoch, checked by the store,
// is the stronger fence.
func (l Lease) Valid() bool { return l.l != nil && l.l.valid() }

type leaseCtxKey struct{}

// LeaseOf returns the lease under which a handler of a Consumer runs, from
// its ctx (with a static assignment as with a dynamic one); false for a ctx
// that is not a handler's.
func LeaseOf(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseCtxKey{}).(*lease)
	if !ok {
		return Lease{}, false
	}
	return Lease{Partition: l.p, Member: l.member, Epoch: l.epoch, l: l}, true
}

// leases is a consumer's side of the bucket: claims, renewals, releases and
// its member key.
type leases struct {
	kv      natsjs.KeyValue
	member  string
	ttl     time.Duration
	margin  time.Duration
	timeout time.Duration // each request's: at most a quarter of the TTL
	fence   bool
	logger  *slog.Logger
	name    string
}

// openBucket creates the bucket with TTL ttl, or opens the one that exists
// with that TTL; another TTL is ErrLeaseBucket.
func openBucket(ctx context.Context, js natsjs.JetStream, bucket string, ttl time.Duration) (natsjs.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, natsjs.KeyValueConfig{Bucket: bucket, TTL: ttl, History: 1,
		Description: "aggflow partition leases and members"})
	if errors.Is(err, natsjs.ErrBucketExists) {
		if kv, err = js.KeyValue(ctx, bucket); err != nil {
			return nil, err
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return nil, err
		}
		if st.TTL() != ttl {
			return nil, fmt.Errorf("%w: bucket %q has TTL %v, want %v", ErrLeaseBucket, bucket, st.TTL(), ttl)
		}
		return kv, nil
	}
	return kv, err
}

// claim creates partition p's lease if nobody holds it: nil when somebody
// does.
func (s *leases) claim(ctx context.Context, p int32) (*lease, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	sent := mono()
	rev, err := s.kv.Create(ctx, leaseKey(p), []byte(s.member))
	switch {
	case errors.Is(err, natsjs.ErrKeyExists):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return newLease(p, s.member, rev, sent+int64(s.ttl-s.margin), s.fence), nil
}

// holder reads partition p's lease: the member that holds it and its epoch
// (natsjs.ErrKeyNotFound if nobody does).
func (s *leases) holder(ctx context.Context, p int32) (member string, epoch uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	e, err := s.kv.Get(ctx, leaseKey(p))
	if err != nil {
		return "", 0, err
	}
	member, epoch = parseLease(e.Value(), e.Revision())
	return member, epoch, nil
}

// renew updates l on the revision held, extending its deadline from the
// time the update was sent. A revision that is not ours any more (the key
// expired, or another member claimed it) kills the lease; another failure
// leaves it to its deadline.
func (s *leases) renew(ctx context.Context, l *lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released || !l.valid() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	sent := mono()
	rev, err := s.kv.Update(ctx, leaseKey(l.p), []byte(s.member+" "+strconv.FormatUint(l.epoch, 10)), l.rev)
	switch {
	case err == nil:
		l.rev = rev
		l.extend(sent + int64(s.ttl-s.margin))
	case errors.Is(err, natsjs.ErrKeyRevisionMismatch) && s.fence:
		s.logger.Warn("jetstream: lease taken", slog.String("consumer", s.name), slog.Int("partition", int(l.p)),
			slog.Uint64("epoch", l.epoch))
		l.kill()
	case ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded):
		s.logger.Warn("jetstream: lease not renewed", slog.String("consumer", s.name), slog.Int("partition", int(l.p)),
			slog.Any("error", err))
	}
}

// release deletes l on the revision held, so that the next claim need not
// wait for the TTL; a lease that is not ours any more stays as it is.
func (s *leases) release(ctx context.Context, l *lease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = true
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := s.kv.Delete(ctx, leaseKey(l.p), natsjs.LastRevision(l.rev))
	if errors.Is(err, natsjs.ErrKeyRevisionMismatch) {
		return nil // expired or claimed since: not ours to delete
	}
	if err != nil {
		return fmt.Errorf("jetstream: consumer %q: releasing the lease of partition %d: %w", s.name, l.p, err)
	}
	return nil
}

// join writes (or rewrites) the member key, which expires TTL after the
// last write.
func (s *leases) join(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.kv.Put(ctx, memberKey(s.member), []byte(strconv.FormatInt(time.Now().UnixMilli(), 10)))
	return err
}

// leave deletes the member key.
func (s *leases) leave(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.kv.Delete(ctx, memberKey(s.member))
}

// view lists the bucket: how many members, which partitions are held.
func (s *leases) view(ctx context.Context) (members int, held map[int32]bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	lister, err := s.kv.ListKeysFiltered(ctx, "m.*", "p.*")
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = lister.Stop() }()
	held = map[int32]bool{}
	self := false
	for k := range lister.Keys() {
		switch {
		case strings.HasPrefix(k, "m."):
			members++
			self = self || k == memberKey(s.member)
		case strings.HasPrefix(k, "p."):
			if p, err := strconv.Atoi(k[2:]); err == nil {
				held[int32(p)] = true
			}
		}
	}
	if ctx.Err() != nil {
		return 0, nil, ctx.Err() // a partial view: act on none of it
	}
	if !self {
		members++
	}
	return members, held, nil
}
